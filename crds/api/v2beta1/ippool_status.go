package v2beta1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	kjson "sigs.k8s.io/json"
)

// AllocatedIPsFromBlocks is status.allocatedIPsFrom of a pool whose allocatedIPs string
// nicpool's pool counter wrote from the pool's IPBlocks, listing every record.
const AllocatedIPsFromBlocks = "IPBlocks"

// AllocatedIPsOmitted is the start of status.allocatedIPsFrom of a pool whose
// allocatedIPs nicpool's pool counter left empty; the reason follows.
const AllocatedIPsOmitted = AllocatedIPsFromBlocks + ", omitted: "

// AllocatedIP is one record of the allocatedIPs string, as spiderpool writes it
// (spiderpool's PoolIPAllocation).
type AllocatedIP struct {
	Pod    string `json:"pod"`
	PodUID string `json:"podUid"`
}

// SpiderpoolRecords reports whether status.allocatedIPs holds records that nicpool's
// pool counter did not write: spiderpool's own, not migrated into IPBlocks yet. No
// pool in that state may hand out an address (the string's records are not in any
// block) or have its string replaced; `kubectl nicpool migrate` moves them. It reads
// no more than the string's first bytes, as it is asked on every allocation.
func (s *IPPoolStatus) SpiderpoolRecords() bool {
	if s.AllocatedIPs == nil || strings.HasPrefix(s.AllocatedIPsFrom, AllocatedIPsFromBlocks) {
		return false
	}
	switch strings.TrimSpace(*s.AllocatedIPs) {
	case "", "{}", "null":
		return false
	}
	return true
}

// UnmarshalJSON decodes a stored status without ever failing, so that one pool whose
// status does not decode cannot stop a list or a watch of every pool: such a status
// decodes as empty, with Unreadable saying why. status.allocatedIPs may be spiderpool's
// string or, written by an older nicpool, an object of records (OlderLayout).
func (s *IPPoolStatus) UnmarshalJSON(data []byte) error {
	var w struct {
		AllocatedIPs     json.RawMessage `json:"allocatedIPs,omitempty"`
		AllocatedIPCount *int64          `json:"allocatedIPCount,omitempty"`
		TotalIPCount     *int64          `json:"totalIPCount,omitempty"`
		AllocatedIPsFrom string          `json:"allocatedIPsFrom,omitempty"`
	}
	*s = IPPoolStatus{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &w); err != nil {
		s.Unreadable = fmt.Sprintf("status does not decode: %v", err)
		return nil
	}
	s.AllocatedIPCount, s.TotalIPCount, s.AllocatedIPsFrom = w.AllocatedIPCount, w.TotalIPCount, w.AllocatedIPsFrom
	raw := bytes.TrimSpace(w.AllocatedIPs)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"':
		var str string
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &str); err != nil {
			s.Unreadable = fmt.Sprintf("status.allocatedIPs does not decode: %v", err)
			return nil
		}
		s.AllocatedIPs = &str
	case raw[0] == '{':
		var recs PoolIPAllocations
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &recs); err != nil {
			*s = IPPoolStatus{Unreadable: fmt.Sprintf("status.allocatedIPs is neither spiderpool's string nor an older nicpool's records: %v", err)}
			return nil
		}
		if len(recs) > 0 {
			s.OlderLayout = recs
		}
	default:
		*s = IPPoolStatus{Unreadable: fmt.Sprintf("status.allocatedIPs is neither spiderpool's string nor an older nicpool's records: %.40s", raw)}
	}
	return nil
}
