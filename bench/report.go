package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// table is the bench's one result table, in Markdown, as docs/performance.md
// shows it.
type table struct {
	machine string
	rows    [][4]string
}

func (t *table) add(key, what, figure, note string) {
	t.rows = append(t.rows, [4]string{key, what, figure, note})
}

func (t *table) print(w io.Writer) {
	fmt.Fprintf(w, "\nMachine: %s\n\n", t.machine)
	fmt.Fprintln(w, "| | what | figure | notes |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range t.rows {
		fmt.Fprintf(w, "| (%s) | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
}

// thousands prints 1000000 as 1,000,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func ms(seconds float64) string { return fmt.Sprintf("%.1f ms", seconds*1000) }
