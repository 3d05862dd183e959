package lua

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// Fingerprint is the SHA1 of script name's code (its prelude included):
// its text without comments, blank lines or the white space that starts
// and ends a line. A model of a script (lua/model, the scored backtest)
// pins it rather than the script's SHA1, which a comment edit changes: a
// pin breaks when the code changes, and only then.
func Fingerprint(name string) (string, error) {
	text, ok := Text(name)
	if !ok {
		return "", fmt.Errorf("lua: no script %s", name)
	}
	sum, err := fingerprint(text)
	if err != nil {
		return "", fmt.Errorf("lua: %s: %w", name, err)
	}
	return sum, nil
}

// fingerprint is the SHA1 of text's code.
func fingerprint(text string) (string, error) {
	c, err := code(text)
	if err != nil {
		return "", err
	}
	sum := sha1.Sum([]byte(c))
	return hex.EncodeToString(sum[:]), nil
}

// SHA is the SHA1 that EVALSHA runs script name by, false for no script
// of that name.
func SHA(name string) (string, bool) {
	for _, sc := range all {
		if sc.name == name {
			return sc.script.Hash(), true
		}
	}
	return "", false
}

// code is a Lua text without its comments ("--" to the end of the line,
// and "--[[ ]]" blocks, outside strings), its blank lines, and the white
// space that starts and ends each line. It fails on a string or a long
// bracket left open, which Lua would refuse too.
func code(text string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			if level, ok := longBracket(text[i+2:]); ok {
				end := closeBracket(text[i+2:], level)
				if end < 0 {
					return "", fmt.Errorf("a comment block left open at byte %d", i)
				}
				i += 2 + end
				b.WriteByte(' ') // a comment block separates what it sits between
				continue
			}
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '\'' || c == '"':
			end := closeQuote(text[i:])
			if end < 0 {
				return "", fmt.Errorf("a string left open at byte %d", i)
			}
			b.WriteString(text[i : i+end])
			i += end
		case c == '[':
			level, ok := longBracket(text[i:])
			if !ok {
				b.WriteByte(c)
				i++
				continue
			}
			end := closeBracket(text[i:], level)
			if end < 0 {
				return "", fmt.Errorf("a long string left open at byte %d", i)
			}
			b.WriteString(text[i : i+end])
			i += end
		default:
			b.WriteByte(c)
			i++
		}
	}
	var lines []string
	for line := range strings.SplitSeq(b.String(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n"), nil
}

// longBracket reads an opening long bracket ("[[", "[=[", ...) at the
// start of s: its level (the number of '='), and whether there is one.
func longBracket(s string) (int, bool) {
	if len(s) == 0 || s[0] != '[' {
		return 0, false
	}
	level := 1
	for level < len(s) && s[level] == '=' {
		level++
	}
	if level < len(s) && s[level] == '[' {
		return level - 1, true
	}
	return 0, false
}

// closeBracket is how many bytes of s, which starts with an opening long
// bracket of level, run to the end of its closing bracket; -1 for none.
func closeBracket(s string, level int) int {
	closing := "]" + strings.Repeat("=", level) + "]"
	end := strings.Index(s[level+2:], closing)
	if end < 0 {
		return -1
	}
	return level + 2 + end + len(closing)
}

// closeQuote is how many bytes of s, which starts with a quote, run to the
// end of the string it opens (escapes skipped); -1 for a string left open
// by the end of its line or of s.
func closeQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case s[0]:
			return i + 1
		case '\n':
			return -1
		}
	}
	return -1
}
