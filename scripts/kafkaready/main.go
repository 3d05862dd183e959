// Command kafkaready tells scripts/kafka.sh whether a freshly started broker
// is ready for the tests: it exits 0 once the broker answers a METADATA
// request, through the same client library fraudwatch uses, and lists
// itself among the brokers. An open port alone is not enough: a KRaft
// broker accepts connections before it has registered with its controller,
// and until then it cannot create topics.
//
// It makes one attempt and exits 1 with the reason on stderr otherwise;
// the script retries, watching the broker's process in between.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	addr := flag.String("addr", "", "broker address, host:port")
	timeout := flag.Duration("timeout", 2*time.Second, "how long the attempt may take")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "kafkaready: -addr is required")
		os.Exit(2)
	}
	if err := probe(*addr, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "kafkaready: %s: %v\n", *addr, err)
		os.Exit(1)
	}
}

func probe(addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: timeout}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return fmt.Errorf("metadata request: %w", err)
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no broker yet")
	}
	return nil
}
