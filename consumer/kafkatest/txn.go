package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnProducer is a transactional producer writing to one partition: the
// franz-go client, which writes transactions as the Java client does
// (idempotent batches, markers written by the broker's coordinator).
type TxnProducer struct {
	t         testing.TB
	cl        *kgo.Client
	topic     string
	partition int32
}

// Codecs are the compression codecs a producer may write with ("" none).
var Codecs = []string{"", "gzip", "snappy", "lz4", "zstd"}

// TxnProducer returns a transactional producer to topic's partition,
// compressing with codec (one of Codecs), closed when t ends.
func (c *Cluster) TxnProducer(t testing.TB, topic string, partition int, codec string) *TxnProducer {
	t.Helper()
	compression := map[string]kgo.CompressionCodec{
		"": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}[codec]
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Brokers...),
		kgo.TransactionalID("kafkatest-"+suffix(t)),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(compression),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		t.Fatalf("kafkatest: transactional producer: %v", err)
	}
	t.Cleanup(cl.Close)
	return &TxnProducer{t: t, cl: cl, topic: topic, partition: int32(partition)}
}

// Begin starts a transaction.
func (p *TxnProducer) Begin() {
	p.t.Helper()
	if err := p.cl.BeginTransaction(); err != nil {
		p.t.Fatalf("kafkatest: begin transaction: %v", err)
	}
}

// Send writes values inside the open transaction and waits until the
// broker has them (in the log, not yet committed or aborted).
func (p *TxnProducer) Send(values ...[]byte) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range values {
		p.cl.Produce(ctx, &kgo.Record{Topic: p.topic, Partition: p.partition, Value: v}, nil)
	}
	if err := p.cl.Flush(ctx); err != nil {
		p.t.Fatalf("kafkatest: flush transaction: %v", err)
	}
}

// End commits (commit) or aborts the open transaction.
func (p *TxnProducer) End(commit bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		p.t.Fatalf("kafkatest: end transaction (commit %v): %v", commit, err)
	}
}

// Transaction writes values in one transaction and commits or aborts it.
func (p *TxnProducer) Transaction(commit bool, values ...[]byte) {
	p.t.Helper()
	p.Begin()
	p.Send(values...)
	p.End(commit)
}
