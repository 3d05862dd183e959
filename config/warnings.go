package config

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
	return out
}
