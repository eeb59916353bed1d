// Package guard is ipamd's one recovery from a panic: a bug in one CNI verb, or in one
// of the goroutines that serve the verbs (the ledger's write queues), fails the calls
// it was serving with an internal error and is logged with its stack; the daemon, and
// every other tenant of the node, goes on.
package guard

import (
	"fmt"
	"runtime/debug"

	"github.com/go-logr/logr"
)

// Panic is a recovered panic.
type Panic struct {
	// In says what was running.
	In    string
	Value any
	Stack []byte
}

func (p *Panic) Error() string {
	return fmt.Sprintf("bug in nicpool (panic in %s: %v): report it with ipamd's log", p.In, p.Value)
}

// Recover, deferred, turns a panic of the running goroutine into a *Panic, logs it and
// hands it to onPanic, which answers whoever waits for the work. in says what runs.
func Recover(log logr.Logger, in string, onPanic func(*Panic)) {
	r := recover()
	if r == nil {
		return
	}
	p := &Panic{In: in, Value: r, Stack: debug.Stack()}
	log.Error(p, "recovered from a panic", "in", in, "stack", string(p.Stack))
	if onPanic != nil {
		onPanic(p)
	}
}
