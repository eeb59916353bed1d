// Package cachestrings lays out the strings of an object the webhook keeps in its
// cache for as long as the object lives there: every pod and SpiderEndpoint of the
// cluster, tens of thousands of them.
//
// A string decoded from the API server's answer is one allocation of its own, rounded
// up to a size class, and it sits among the decoded strings the cache transforms drop
// (labels, annotations, addresses); one kept string keeps its whole span of such
// garbage resident. Values shared by many objects (a namespace, a node, a kind) are
// kept once, canonical; the values of one object alone (its name, UID, resource
// version) are copied into one allocation of their own.
package cachestrings

import (
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Shared returns the canonical copy of s, a value that many cached objects hold
// (a namespace, a node name, a kind): one copy for the whole cache, freed when no
// object holds it any more.
func Shared(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// Own copies the strings each pointer points to, values of one object alone, into
// one new allocation and points each at its copy.
func Own(ps ...*string) {
	n := 0
	for _, p := range ps {
		n += len(*p)
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range ps {
		b.WriteString(*p)
	}
	all := b.String()
	for _, p := range ps {
		l := len(*p)
		*p, all = all[:l], all[l:]
	}
}

// OwnWithUID is Own with an object's UID among its strings.
func OwnWithUID(uid *types.UID, ps ...*string) {
	u := string(*uid)
	Own(append(ps, &u)...)
	*uid = types.UID(u)
}

// TypeMeta is t with the canonical copies of its strings, the same for every object
// of a kind.
func TypeMeta(t metav1.TypeMeta) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: Shared(t.APIVersion), Kind: Shared(t.Kind)}
}
