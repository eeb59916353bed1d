package annotations

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NetworkSelection is one element of k8s.v1.cni.cncf.io/networks. Only the fields that
// decide interface naming are kept; other fields of the JSON form are accepted.
type NetworkSelection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Interface is the requested interface name ("interface" in JSON, "@ifname" in the
	// short form); empty means Multus names it net<position>.
	Interface string `json:"interface,omitempty"`
}

// Interface is one network interface of a pod, named as Multus names it.
type Interface struct {
	// Name is the interface name inside the pod: eth0, then the explicit name or
	// net<position> for each secondary network.
	Name string
	// Network is "namespace/name" of the NetworkAttachmentDefinition; empty for eth0.
	Network string
	// Position is 0 for eth0 and i for the i-th secondary network (1-based).
	Position int
}

// ParseNetworks parses the Multus networks annotation in either form. Names without
// a namespace get podNamespace. An empty value means no secondary networks.
func ParseNetworks(value, podNamespace string) ([]NetworkSelection, field.ErrorList) {
	path := Path(MultusNetworks)
	trimmed := strings.TrimSpace(value)
	if trimmed == "" {
		return nil, nil
	}
	var sel []NetworkSelection
	var errs field.ErrorList
	if strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal([]byte(trimmed), &sel); err != nil {
			return nil, field.ErrorList{field.Invalid(path, value, fmt.Sprintf("must be a JSON list of network selection elements such as [{\"name\":\"macvlan\",\"interface\":\"net1\"}]: %v", err))}
		}
	} else {
		for i, item := range strings.Split(trimmed, ",") {
			s, err := parseShortForm(strings.TrimSpace(item), path.Index(i))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			sel = append(sel, s)
		}
	}
	for i := range sel {
		p := path.Index(i)
		if sel[i].Namespace == "" {
			sel[i].Namespace = podNamespace
		}
		for _, msg := range validation.IsDNS1123Subdomain(sel[i].Name) {
			errs = append(errs, field.Invalid(p.Child("name"), sel[i].Name, "network name "+msg))
		}
		for _, msg := range validation.IsDNS1123Label(sel[i].Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), sel[i].Namespace, "namespace "+msg))
		}
		if sel[i].Interface != "" {
			if err := ValidateInterfaceName(sel[i].Interface, p.Child("interface")); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return sel, nil
}

// parseShortForm parses "[namespace/]name[@ifname]".
func parseShortForm(item string, path *field.Path) (NetworkSelection, *field.Error) {
	const allowed = "must be [namespace/]name[@interface], e.g. macvlan-a or team-a/macvlan-a@net5"
	if item == "" {
		return NetworkSelection{}, field.Invalid(path, item, "empty network name: "+allowed)
	}
	var s NetworkSelection
	rest := item
	if ns, name, ok := strings.Cut(rest, "/"); ok {
		if ns == "" || strings.Contains(name, "/") {
			return NetworkSelection{}, field.Invalid(path, item, allowed)
		}
		s.Namespace, rest = ns, name
	}
	if name, ifname, ok := strings.Cut(rest, "@"); ok {
		if ifname == "" || strings.Contains(ifname, "@") {
			return NetworkSelection{}, field.Invalid(path, item, allowed)
		}
		s.Interface, rest = ifname, name
	}
	s.Name = rest
	return s, nil
}

// ValidateInterfaceName checks a Linux interface name: 1 to 15 printable ASCII
// characters, no '/', ':' or white space, not "." or "..". (Linux accepts more bytes,
// but a name must survive the JSON round trip of the annotations unchanged.)
func ValidateInterfaceName(name string, path *field.Path) *field.Error {
	switch {
	case name == "":
		return field.Required(path, "an interface name such as eth0 or net1")
	case len(name) > 15:
		return field.TooLong(path, name, 15)
	case name == "." || name == "..":
		return field.Invalid(path, name, "must be a Linux interface name such as net1")
	case strings.ContainsAny(name, "/:"):
		return field.Invalid(path, name, "a Linux interface name must not contain '/', ':' or white space")
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] > '~' {
			return field.Invalid(path, name, "a Linux interface name must be printable ASCII without '/', ':' or white space, e.g. net1")
		}
	}
	return nil
}

// PodInterfaces returns the pod's interfaces in order, named as Multus names them:
// eth0, then for the i-th network selection element its explicit interface or
// net<i>. An explicit name does not renumber the rest ("a@foo, b" gives foo, net2).
// Two interfaces with one name are an error.
func PodInterfaces(podAnnotations map[string]string, podNamespace string) ([]Interface, field.ErrorList) {
	sel, errs := ParseNetworks(podAnnotations[MultusNetworks], podNamespace)
	if len(errs) > 0 {
		return nil, errs
	}
	ifs := make([]Interface, 0, len(sel)+1)
	ifs = append(ifs, Interface{Name: DefaultInterface})
	seen := map[string]int{DefaultInterface: 0}
	path := Path(MultusNetworks)
	for i, s := range sel {
		pos := i + 1
		name := s.Interface
		if name == "" {
			name = fmt.Sprintf("net%d", pos)
		}
		if prev, dup := seen[name]; dup {
			errs = append(errs, field.Invalid(path.Index(i), s.Name, fmt.Sprintf("interface %q of network %s/%s is already used by %s; give one of them another name with @ifname or \"interface\"", name, s.Namespace, s.Name, describe(ifs[prev]))))
			continue
		}
		seen[name] = len(ifs)
		ifs = append(ifs, Interface{Name: name, Network: s.Namespace + "/" + s.Name, Position: pos})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return ifs, nil
}

func describe(i Interface) string {
	if i.Position == 0 {
		return "the cluster network"
	}
	return "network " + i.Network
}

// strictUnmarshal decodes JSON rejecting unknown fields and trailing data.
func strictUnmarshal(data string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}
