package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Where the credentials of a client go instead of its address.
const (
	kafkaCredentials = "kafka.sasl.username and kafka.sasl.password"
	redisCredentials = "redis.username and redis.password"
)

// CheckAddresses checks the four addresses alone (kafka.brokers,
// redis.addrs, metrics.listen, slack.interactions_listen), as Validate
// does. It is for code handed a Config that may not have been validated,
// before it dials or listens: an address carrying credentials would be
// quoted by every error and log line about it.
func (c *Config) CheckAddresses() error {
	k := &checker{c: c}
	k.addresses()
	return errors.Join(k.errs...)
}

func (k *checker) addresses() {
	c := k.c
	k.hostPorts("kafka.brokers", c.Kafka.Brokers, "broker", kafkaCredentials)
	k.hostPorts("redis.addrs", c.Redis.Addrs, "address", redisCredentials)
	if c.Metrics.Listen == "" {
		k.bad("metrics.listen", "is required (host:port, or :port for every interface)")
	} else {
		k.address("metrics.listen", c.Metrics.Listen, "")
	}
	if c.Slack.InteractionsListen != "" {
		k.address("slack.interactions_listen", c.Slack.InteractionsListen, "")
	}
}

// hostPorts checks a list of addresses to dial.
func (k *checker) hostPorts(field string, addrs []string, what, credentials string) {
	if len(addrs) == 0 {
		k.bad(field, "needs at least one %s (host:port)", what)
	}
	for i, a := range addrs {
		k.address(fmt.Sprintf("%s[%d]", field, i), a, credentials)
	}
}

// address checks one address: host:port to dial, where credentials names
// the keys its credentials belong in, or, with credentials "", a listener's
// host:port or :port. Credentials and URLs are refused before
// net.SplitHostPort sees them: it takes "token@host:6379" for a host named
// "token@host", and says only "too many colons" of "redis://host:6379".
// The message quotes the address with its credentials redacted.
func (k *checker) address(field, addr, credentials string) {
	listener := credentials == ""
	form := "host:port"
	if listener {
		form = "host:port (or :port)"
	}
	var why string
	scheme, _, isURL := strings.Cut(addr, "://")
	switch {
	case strings.Contains(addr, "@") && listener:
		why = "a listener takes no credentials (user@ or user:password@)"
	case strings.Contains(addr, "@"):
		why = "credentials (user@ or user:password@) do not go in an address, but in " + credentials
	case isURL && isScheme(scheme):
		why = "write the host:port alone, without " + scheme + "://"
	default:
		_, _, err := splitHostPort(addr, !listener)
		if err == nil {
			return
		}
		why = err.Error()
	}
	k.bad(field, "%q is not %s: %s", redactAddress(addr), form, why)
}

// sameListener reports whether two listen addresses would take one port:
// the same host, or either of them every interface (":9464" beside the
// default 127.0.0.1:9464). Port 0 picks a free one, and never collides.
func sameListener(a, b string) bool {
	ah, ap, aerr := net.SplitHostPort(a)
	bh, bp, berr := net.SplitHostPort(b)
	if aerr != nil || berr != nil {
		return a == b
	}
	every := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ap == bp && ap != "0" && (ah == bh || every(ah) || every(bh))
}

// splitHostPort accepts host:port with a numeric port; needHost refuses
// ":port" (fine for a listener, not for something to dial).
func splitHostPort(addr string, needHost bool) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return "", 0, errors.New(ae.Err)
		}
		return "", 0, err
	}
	if needHost && host == "" {
		return "", 0, errors.New("missing host")
	}
	if strings.ContainsFunc(host, notHostRune) {
		// Not quoted: a ?query or a path may hold a password.
		return "", 0, errors.New("a host holds only letters, digits, '.', '-' and '_' (an IPv6 address goes in brackets)")
	}
	lo := 0
	if needHost {
		lo = 1
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < lo || n > 65535 {
		return "", 0, fmt.Errorf("port must be a number from %d to 65535", lo)
	}
	return host, n, nil
}

// notHostRune reports a character no host name (as Go's resolver takes
// them) nor IPv6 address (with its %zone) has.
func notHostRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		r == '.' || r == '-' || r == '_' || r == ':' || r == '%')
}
