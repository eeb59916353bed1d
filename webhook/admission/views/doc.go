// Package views keeps read-only views of pools, namespaces and SpiderEndpoints that
// admission decisions read on the hot path. Each view is fed by a controller-runtime
// informer and holds only what admission needs, computed once per change (selectors
// compiled, family derived), so a decision is a few map reads under a read lock.
package views
