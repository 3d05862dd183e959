package config

import (
	"net"
	"strings"
)

// Warnings lists the settings that work but give away security, each
// naming its key (and the environment variable that set it): `fraudwatch
// check` prints them and `fraudwatch run` logs them at start, so that
// nobody runs them unknowingly. They never quote a secret.
func (c *Config) Warnings() []string {
	var out []string
	warn := func(key, msg string) {
		w := key + ": " + msg
		if env := c.env[key]; env != "" {
			w += " (set by " + env + ")"
		}
		out = append(out, w)
	}
	k := &c.Kafka
	if k.SASL.Mechanism == SASLPlain && !k.TLS.Enabled {
		warn("kafka.sasl.mechanism", "plain without kafka.tls.enabled sends the SASL password to the brokers in clear text")
	}
	if k.TLS.InsecureSkipVerify {
		warn("kafka.tls.insecure_skip_verify", "true: the brokers' certificates are not verified, so anyone on the network path can pose as them")
	}
	if c.Redis.TLS.InsecureSkipVerify {
		warn("redis.tls.insecure_skip_verify", "true: Redis's certificate is not verified, so anyone on the network path can pose as it")
	}
	if c.Metrics.Pprof && !loopback(c.Metrics.Listen) {
		warn("metrics.pprof", "true on "+c.Metrics.Listen+", beyond this host: whoever reaches the listener can take profiles, which cost CPU while they run and show the code's hot paths")
	}
	return out
}

// loopback reports whether a listen address (host:port, checked) is this
// host's alone: a loopback IP or localhost. An empty host is every
// interface.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
