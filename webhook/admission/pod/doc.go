// Package pod decides admission for pods that select nicpool pools: it resolves every
// ipam.spidernet.io/ippools entry to a concrete interface and concrete pools, denies
// what ipamd could not serve with a message that names the field and the fix, and
// stamps a StatefulSet pod with the UID of the SpiderEndpoint it may take over.
//
// The decision (Admission.Decide) is plain Go over views kept by informers; the HTTP
// side (Handler) only decodes the pod's metadata and turns a Decision into a patch.
package pod
