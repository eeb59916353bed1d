package spiderpool

import (
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

// The ippoolcr run on every node and the run on one node split the suite's specs by
// oneNodeLabel: whatever SPIDERPOOL_LABELS selects runs in exactly one of them.
func TestOneNodeSplit(t *testing.T) {
	specs := map[string][]string{
		"D00009 (multusName Context)":     {oneNodeLabel, "D00009", "D00010"},
		"NIC name specified (multusName)": {oneNodeLabel},
		"D00014 (elsewhere in ippoolcr)":  {"D00014"},
		"unlabelled":                      nil,
	}
	for _, user := range []string{"", "D00009", "D00014", "D00009 || D00014", "!D00010"} {
		all, err := types.ParseLabelFilter(labelsAnd(user, "!"+oneNodeLabel))
		if err != nil {
			t.Fatalf("SPIDERPOOL_LABELS=%q: every-node filter: %v", user, err)
		}
		one, err := types.ParseLabelFilter(labelsAnd(user, oneNodeLabel))
		if err != nil {
			t.Fatalf("SPIDERPOOL_LABELS=%q: one-node filter: %v", user, err)
		}
		selected := func(labels []string) bool { return true }
		if user != "" {
			if selected, err = types.ParseLabelFilter(user); err != nil {
				t.Fatal(err)
			}
		}
		for name, labels := range specs {
			inAll, inOne := all(labels), one(labels)
			switch {
			case inAll && inOne:
				t.Errorf("SPIDERPOOL_LABELS=%q: %s runs twice", user, name)
			case (inAll || inOne) != selected(labels):
				t.Errorf("SPIDERPOOL_LABELS=%q: %s runs %v, selected %v", user, name, inAll || inOne, selected(labels))
			case inOne != (selected(labels) && len(labels) > 0 && labels[0] == oneNodeLabel):
				t.Errorf("SPIDERPOOL_LABELS=%q: %s on one node: %v", user, name, inOne)
			}
		}
	}
}
