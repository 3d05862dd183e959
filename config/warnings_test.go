package config

import (
	"slices"
	"testing"
)

func TestWarnings(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string
	}{
		{name: "defaults", mutate: func(c *Config) {}},
		{name: "sasl plain without tls", mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: SASLPlain, Username: "fw", Password: "psecret"}
		}, want: []string{"kafka.sasl.mechanism: plain without kafka.tls.enabled sends the SASL password to the brokers in clear text"}},
		{name: "sasl plain over tls", mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: SASLPlain, Username: "fw", Password: "psecret"}
			c.Kafka.TLS.Enabled = true
		}},
		{name: "scram without tls", mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: SASLScramSHA512, Username: "fw", Password: "psecret"}
		}},
		{name: "both insecure_skip_verify", mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, InsecureSkipVerify: true}
			c.Redis.TLS = TLS{Enabled: true, InsecureSkipVerify: true}
		}, want: []string{
			"kafka.tls.insecure_skip_verify: true: the brokers' certificates are not verified, so anyone on the network path can pose as them",
			"redis.tls.insecure_skip_verify: true: Redis's certificate is not verified, so anyone on the network path can pose as it",
		}},
		{name: "pprof on loopback", mutate: func(c *Config) { c.Metrics.Pprof = true }},
		{name: "pprof beyond this host", mutate: func(c *Config) {
			c.Metrics.Pprof, c.Metrics.Listen = true, ":9464"
		}, want: []string{"metrics.pprof: true on :9464, beyond this host: whoever reaches the listener can take profiles, which cost CPU while they run and show the code's hot paths"}},
		{name: "set by the environment", mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: SASLPlain, Username: "fw", Password: "psecret"}
			c.env = map[string]string{"kafka.sasl.mechanism": "FRAUDWATCH_KAFKA_SASL_MECHANISM"}
		}, want: []string{"kafka.sasl.mechanism: plain without kafka.tls.enabled sends the SASL password to the brokers in clear text (set by FRAUDWATCH_KAFKA_SASL_MECHANISM)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			got := c.Warnings()
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Warnings() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
