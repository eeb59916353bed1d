package pod

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
)

// memo remembers the result of parsing an annotation value. Pods of one controller
// carry identical annotations, so at a high pod rate most parses repeat; parsing
// (JSON decoding and name validation) is most of a decision's cost. Results are
// shared and must not be modified. The memo is bounded: when full it starts over.
type memo[V any] struct {
	mu sync.RWMutex
	m  map[string]memoEntry[V]
}

type memoEntry[V any] struct {
	v    V
	errs field.ErrorList
}

const (
	memoSize = 4096
	// memoKeyMax keeps large values out of the memo, so that it stays small (a few
	// MiB at most) whatever pods are created; real annotations are far shorter.
	memoKeyMax = 1024
)

func (c *memo[V]) get(key string, parse func() (V, field.ErrorList)) (V, field.ErrorList) {
	if len(key) > memoKeyMax {
		return parse()
	}
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if ok {
		return e.v, e.errs
	}
	v, errs := parse()
	c.mu.Lock()
	if c.m == nil || len(c.m) >= memoSize {
		c.m = make(map[string]memoEntry[V], 64)
	}
	c.m[key] = memoEntry[V]{v: v, errs: errs}
	c.mu.Unlock()
	return v, errs
}

// parsers memoizes the annotation parsers a decision uses.
type parsers struct {
	selections memo[[]annotations.PoolSelection]
	single     memo[annotations.SinglePoolSelection]
	interfaces memo[[]annotations.Interface]
}

func (p *parsers) poolSelections(value string) ([]annotations.PoolSelection, field.ErrorList) {
	return p.selections.get(value, func() ([]annotations.PoolSelection, field.ErrorList) {
		return annotations.ParsePoolSelections(value)
	})
}

func (p *parsers) singlePoolSelection(value string) (annotations.SinglePoolSelection, field.ErrorList) {
	return p.single.get(value, func() (annotations.SinglePoolSelection, field.ErrorList) {
		return annotations.ParseSinglePoolSelection(value)
	})
}

func (p *parsers) podInterfaces(podAnnotations map[string]string, namespace string) ([]annotations.Interface, field.ErrorList) {
	networks := podAnnotations[annotations.MultusNetworks]
	return p.interfaces.get(namespace+"\x00"+networks, func() ([]annotations.Interface, field.ErrorList) {
		return annotations.PodInterfaces(map[string]string{annotations.MultusNetworks: networks}, namespace)
	})
}
