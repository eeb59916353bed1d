// Package certs provides the webhook's serving certificate in self-managed mode:
// open-policy-agent/cert-controller generates a CA and a serving certificate, keeps
// them in a Secret of nicpool's namespace, injects the CA into nicpool's webhook
// configurations and rotates before expiry; a Keeper follows that Secret and serves
// its current certificate to the webhook server from memory (no restart on rotation),
// also writing it to a directory for tools that expect files.
//
// With cert-manager the certificate is mounted instead, and none of this runs.
// In both modes ExpiryCollector reports when the served certificate expires.
package certs
