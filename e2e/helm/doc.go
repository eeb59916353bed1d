// Package helm tests the Helm chart charts/nicpool with the Helm SDK: it renders the
// same objects as the kustomizations it is generated from, values change what they
// say, and it installs, upgrades and uninstalls on a real API server without taking
// the pools with it. It also runs the migration runbook's uninstall of spiderpool's
// release, against a stand-in of spiderpool's chart. A module of its own: Helm's
// dependencies stay out of nicpool's.
package helm
