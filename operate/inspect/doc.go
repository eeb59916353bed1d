// Package inspect answers an operator's questions about allocation state: who holds an
// address, what each interface of a pod was given, how full each pool is. It only
// reads: records through ledger.List, and pools, endpoints and pods as they are.
//
// The views are plain structs, printed by operate/cli as tables, JSON or YAML.
package inspect
