package main

import (
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
)

// The rules fraudwatch ships write their thresholds as {threshold}, so
// that an alert after a reload of a threshold does not contradict its
// description (docs/configuration.md, Rules). The ConfigMap's rules pass
// check without a warning in TestKubernetesManifests.
func TestShippedDescriptionsFollowTheirThresholds(t *testing.T) {
	for _, path := range []string{deployDir + "/rules.yaml", "demo/rules.yaml"} {
		rs, err := config.LoadRules(path)
		if err != nil {
			t.Fatal(err)
		}
		if w := config.DescriptionWarnings(path, rs); len(w) > 0 {
			t.Errorf("%s", strings.Join(w, "\n"))
		}
		for _, r := range rs {
			if !strings.Contains(r.Description, "{threshold}") {
				t.Errorf("%s: rule %s: description %q does not name {threshold}", path, r.Name, r.Description)
			}
		}
	}
}
