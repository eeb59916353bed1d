// Package annotations is the annotation contract nicpool shares with spiderpool and
// Multus: the keys, their JSON shapes, and parsers that turn them into typed values
// with field.ErrorList errors naming the exact annotation and index at fault.
//
// The webhook, ipamd and the CNI plugin all read annotations through this package so
// that they agree on every interface name and pool list.
package annotations
