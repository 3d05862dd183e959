package dispatch_test

import "github.com/fraudwatch/fraudwatch/internal/testkit"

// Secrets of the test notifiers: no error may show them.
const (
	testWebhookPath = "/services/T0001/B0001/WebhookSecret0123"
	testToken       = "xoxb-1111-2222-TokenSecret0123"
)

// sampleAlert is testkit.SampleAlert, under the name these tests call it by.
var sampleAlert = testkit.SampleAlert
