// Package spiderpoolcrds checks nicpool's CRDs against spiderpool's own, from
// spiderpool's module (github.com/spidernet-io/spiderpool v1.2.2): every field
// spiderpool's SpiderIPPool, SpiderEndpoint, SpiderReservedIP and SpiderCoordinator accept, nicpool's
// accept with the same type, and clients built on spiderpool's Go types decode what
// nicpool's API server serves.
package spiderpoolcrds

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// kinds are the CRDs nicpool serves in spiderpool's place, by file name in both
// repositories.
var kinds = []string{
	"spiderpool.spidernet.io_spiderippools.yaml",
	"spiderpool.spidernet.io_spiderendpoints.yaml",
	"spiderpool.spidernet.io_spiderreservedips.yaml",
	"spiderpool.spidernet.io_spidercoordinators.yaml",
}

// narrower are the places where nicpool's schema refuses a value spiderpool's schema
// takes, each with why: the value is one spiderpool's own webhook refuses, or one
// that fails at ADD in spiderpool too. Anything else narrower fails the test.
var narrower = map[string]string{
	"spiderippools: .spec.subnet: format cidr, maxLength 43":                      "spiderpool's webhook refuses a subnet that is no CIDR",
	"spiderippools: .spec.routes[].dst: format cidr":                              "spiderpool's webhook refuses a route whose dst is no CIDR",
	"spiderendpoints: .status.current.ips[].routes[].dst: format cidr":            "written by ipamd only, from a pool's routes, which spiderpool's webhook and nicpool's refuse without a CIDR dst",
	"spiderendpoints: .status.current.ips[].routes[].gw: minLength 1":             "written by ipamd only, from a pool's routes, which spiderpool's webhook and nicpool's refuse without gw",
	"spiderippools: .spec.routes[].gw: minLength 1":                               "spiderpool's webhook refuses a route without gw",
	"spiderendpoints: .status.current.ips[].interface: minLength 1, maxLength 15": "a Linux interface name has 1 to 15 characters: spiderpool fails at ADD on any other",
	"spiderippools: .spec: x-kubernetes-validations":                              "ipVersion and subnet immutable, subnet canonical, ipVersion of subnet's family: spiderpool's webhook refuses the same",
	"spidercoordinators: .spec.hijackCIDR: maxItems 64":                           "every coordinator call of every node is answered from the list; spiderpool sets no bound",
	"spidercoordinators: .spec.policyRoutes: maxItems 64":                         "every coordinator call of every node is answered from the list; spiderpool sets no bound",
	"spidercoordinators: .spec.hijackCIDR[]: maxLength 64":                        "a CIDR or an address, as spiderpool's webhook requires, is at most 43 characters",
	"spidercoordinators: .spec.policyRoutes[].dst: maxLength 64":                  "a CIDR or an address, as spiderpool's webhook requires, is at most 43 characters",
	"spidercoordinators: .spec.policyRoutes[].gw: maxLength 64":                   "an address, as spiderpool's webhook requires, is at most 39 characters",
	"spidercoordinators: .spec.vethLinkAddress: maxLength 64":                     "an address, as spiderpool's webhook requires, is at most 39 characters",
	"spidercoordinators: .spec.podMACPrefix: maxLength 64":                        "two bytes, xx:yy, as spiderpool's webhook requires",
	"spidercoordinators: .spec.podDefaultRouteNIC: maxLength 64":                  "an interface name, at most 15 characters: coordinator fails at ADD on any other",
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// spiderpoolDir is where the Go command keeps spiderpool's module.
func spiderpoolDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/spidernet-io/spiderpool").Output()
	if err != nil {
		t.Fatalf("locate spiderpool's module: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}

func version(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name == name {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("CRD %s serves no version %s", crd.Name, name)
	return nil
}

// TestSchemasAcceptWhatSpiderpoolAccepts walks spiderpool's openAPIV3Schema of each
// kind beside nicpool's: every field spiderpool has, nicpool has with the same type;
// nicpool requires nothing spiderpool does not; and where nicpool's constraints are
// narrower than spiderpool's, the place is one of narrower's, with its reason.
func TestSchemasAcceptWhatSpiderpoolAccepts(t *testing.T) {
	spider := spiderpoolDir(t)
	var found []string
	for _, kind := range kinds {
		theirs := readCRD(t, filepath.Join(spider, "charts", "spiderpool", "crds", kind))
		ours := readCRD(t, filepath.Join(repoRoot(t), "crds", "yaml", kind))
		if theirs.Spec.Names.Kind != ours.Spec.Names.Kind || theirs.Spec.Scope != ours.Spec.Scope {
			t.Errorf("%s: kind %s scope %s, spiderpool's %s %s", kind, ours.Spec.Names.Kind, ours.Spec.Scope, theirs.Spec.Names.Kind, theirs.Spec.Scope)
		}
		for _, short := range theirs.Spec.Names.ShortNames {
			if !slices.Contains(ours.Spec.Names.ShortNames, short) {
				t.Errorf("%s: no short name %s", kind, short)
			}
		}
		w := &walker{t: t, kind: theirs.Spec.Names.Plural}
		w.compare(".", version(t, theirs, "v2beta1"), version(t, ours, "v2beta1"))
		found = append(found, w.narrower...)
	}
	for _, n := range found {
		if _, ok := narrower[n]; !ok {
			t.Errorf("nicpool's schema refuses what spiderpool's takes, at %s: accept it, or list it in narrower with the reason", n)
		}
	}
	for n := range narrower {
		if !slices.Contains(found, n) {
			t.Errorf("narrower lists %s, which is no longer narrower: remove it", n)
		}
	}
}

type walker struct {
	t        *testing.T
	kind     string
	narrower []string
}

func (w *walker) compare(path string, theirs, ours *apiextensionsv1.JSONSchemaProps) {
	if ours.XPreserveUnknownFields != nil && *ours.XPreserveUnknownFields && ours.Type == "" {
		return // nicpool takes anything here
	}
	if theirs.Type != ours.Type {
		w.t.Errorf("%s: %s is of type %q, spiderpool's of type %q", w.kind, path, ours.Type, theirs.Type)
		return
	}
	var limits []string
	if ours.Format != "" && ours.Format != theirs.Format && ours.Format != "int64" && ours.Format != "int32" {
		limits = append(limits, "format "+ours.Format)
	}
	if ours.MinLength != nil && (theirs.MinLength == nil || *ours.MinLength > *theirs.MinLength) {
		limits = append(limits, fmt.Sprintf("minLength %d", *ours.MinLength))
	}
	if ours.MaxLength != nil && (theirs.MaxLength == nil || *ours.MaxLength < *theirs.MaxLength) {
		limits = append(limits, fmt.Sprintf("maxLength %d", *ours.MaxLength))
	}
	if ours.MaxItems != nil && (theirs.MaxItems == nil || *ours.MaxItems < *theirs.MaxItems) {
		limits = append(limits, fmt.Sprintf("maxItems %d", *ours.MaxItems))
	}
	if ours.Minimum != nil && (theirs.Minimum == nil || *ours.Minimum > *theirs.Minimum) {
		limits = append(limits, fmt.Sprintf("minimum %g", *ours.Minimum))
	}
	if ours.Maximum != nil && (theirs.Maximum == nil || *ours.Maximum < *theirs.Maximum) {
		limits = append(limits, fmt.Sprintf("maximum %g", *ours.Maximum))
	}
	if ours.Pattern != "" && ours.Pattern != theirs.Pattern {
		limits = append(limits, "pattern "+ours.Pattern)
	}
	if len(ours.Enum) > 0 {
		for _, e := range theirs.Enum {
			if !slices.ContainsFunc(ours.Enum, func(o apiextensionsv1.JSON) bool { return string(o.Raw) == string(e.Raw) }) {
				limits = append(limits, "enum without "+string(e.Raw))
			}
		}
		if len(theirs.Enum) == 0 {
			limits = append(limits, "enum")
		}
	}
	if len(limits) > 0 {
		w.narrower = append(w.narrower, fmt.Sprintf("%s: %s: %s", w.kind, path, strings.Join(limits, ", ")))
	}
	if len(ours.XValidations) > 0 {
		w.narrower = append(w.narrower, fmt.Sprintf("%s: %s: x-kubernetes-validations", w.kind, path))
	}
	for _, r := range ours.Required {
		if !slices.Contains(theirs.Required, r) {
			w.t.Errorf("%s: %s requires %s, which spiderpool's does not", w.kind, path, r)
		}
	}
	names := make([]string, 0, len(theirs.Properties))
	for name := range theirs.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path == "." && name == "metadata" {
			continue
		}
		sub := strings.TrimSuffix(path, ".") + "." + name
		o, ok := ours.Properties[name]
		if !ok {
			if ours.XPreserveUnknownFields == nil || !*ours.XPreserveUnknownFields {
				w.t.Errorf("%s: no field %s, which spiderpool's has (it would be pruned)", w.kind, sub)
			}
			continue
		}
		th := theirs.Properties[name]
		w.compare(sub, &th, &o)
	}
	if theirs.Items != nil && theirs.Items.Schema != nil {
		if ours.Items == nil || ours.Items.Schema == nil {
			w.t.Errorf("%s: %s has no item schema, spiderpool's has", w.kind, path)
		} else {
			w.compare(path+"[]", theirs.Items.Schema, ours.Items.Schema)
		}
	}
	if theirs.AdditionalProperties != nil && theirs.AdditionalProperties.Schema != nil {
		if ours.AdditionalProperties == nil || ours.AdditionalProperties.Schema == nil {
			w.t.Errorf("%s: %s takes no additional properties, spiderpool's does", w.kind, path)
		} else {
			w.compare(path+"{}", theirs.AdditionalProperties.Schema, ours.AdditionalProperties.Schema)
		}
	}
}
