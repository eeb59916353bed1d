// Package memory measures what nicpool's real binaries, nicpool-ipamd and
// nicpool-webhook, hold resident against a real API server filled with allocated
// pools, endpoints and pods (design goal: under 64 MiB each with 10 pools of 1000
// allocated addresses). Its benchmark reports the figures; its test checks that the
// harness starts both binaries and that they answer.
package memory
