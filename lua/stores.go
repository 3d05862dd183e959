package lua

import (
	"crypto/sha256"
	"encoding/hex"
)

// A receiver's stores are the keys the dispatcher keeps for it alone: the
// alert budgets, the parked alerts and their leases (here), and the alerts
// waiting for their budget (waiting.go).

// ForReceiver returns keys whose stores (budgets, parked and waiting
// alerts, and their leases) are the receiver's own, so that one
// receiver's budget, parking and waiting never touch another's. The
// Slack receiver's stores keep the names they had before there were
// receivers (ReceiverSlack), so that replicas of both versions share
// them. Every other key (counters, cooldowns, records) is the same.
func (k Keys) ForReceiver(name string) Keys {
	k.stores = ""
	if name != ReceiverSlack {
		k.stores = k.prefix + ":" + name
	}
	return k
}

// storePrefix starts the keys of the receiver's stores.
func (k Keys) storePrefix() string {
	if k.stores == "" {
		return k.prefix
	}
	return k.stores
}

// ReceiverSlack is the name of alert/slack's receiver (slack.ReceiverName,
// held equal by a test), whose stores keep their names from before
// receivers (ForReceiver).
const ReceiverSlack = "slack"

// Parked is the key of the alerts parked because Slack refuses their
// channel (alert id -> the alert); ParkedLease the lease of one of them.
func (k Keys) Parked() string { return k.storePrefix() + ":parked" }

// ParkedLease is the key of the lease on one parked alert's retry.
func (k Keys) ParkedLease(id string) string {
	sum := sha256.Sum256([]byte(id))
	return k.storePrefix() + ":parked-lease:" + hex.EncodeToString(sum[:16])
}

// Budget names the alert budgets: one a channel and the overall one, in
// one hash tag so that one call takes from both.
func (k Keys) Budget(channel string) (channelKey, overallKey string) {
	sum := sha256.Sum256([]byte(channel))
	return k.storePrefix() + ":{budget}:c:" + hex.EncodeToString(sum[:12]), k.storePrefix() + ":{budget}:all"
}

// ReceiverSince is the key of when a receiver first ran, in any replica
// (Scripts.ReceiverSince): a receiver added to a running deployment is
// given the alerts published since, not the alerts topic's history.
func (k Keys) ReceiverSince(name string) string { return k.prefix + ":receiver-since:" + name }
