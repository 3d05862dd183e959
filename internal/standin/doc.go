// Package standin holds stand-ins for the services fraudwatch's receivers
// speak to: Slack's Web API (chat.postMessage, chat.update), PagerDuty's
// Events API v2, and a webhook endpoint that verifies Standard Webhooks
// signatures. Each is an httptest.Server closed when its test ends; each
// checks what the client under test sends as the service documents it and
// fails the test (t.Errorf) with what was wrong. They are shared by the
// receivers' package tests, the end-to-end tests of cmd/fraudwatch and
// make bench's routed-alert rows: never the service.
package standin
