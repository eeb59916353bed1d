package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nicpool/nicpool/ipamd/api"
)

// The plugin reads the CNI protocol's environment and stdin itself rather than through
// the CNI library's skel package, and answers as skel does (same checks, codes and
// messages: TestServeAnswersAsSkel runs both on a catalogue of calls). skel reads the
// process's own environment, stdin and network namespace, and ipamd serves calls of
// the front from a frame: one dispatcher serves both.

// CmdArgs is one CNI call: the CNI_* environment the runtime sets and the network
// configuration it writes on stdin.
type CmdArgs struct {
	ContainerID   string
	Netns         string
	IfName        string
	Args          string
	Path          string
	NetnsOverride string
	StdinData     []byte
}

// Funcs are the plugin's CNI verbs.
type Funcs struct {
	Add    func(*CmdArgs) error
	Del    func(*CmdArgs) error
	Check  func(*CmdArgs) error
	GC     func(*CmdArgs) error
	Status func(*CmdArgs) error
}

// PrintError writes e as the CNI library prints an error (indented JSON): what a
// failed call prints on stdout before it exits 1.
func PrintError(w io.Writer, e *types.Error) error {
	b, err := json.MarshalIndent(e, "", "    ")
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Call is where one CNI call comes from: the CNI_* environment and stdin.
type Call struct {
	Getenv func(string) string
	// Stdin is read for the network configuration, unless StdinData holds it already
	// (a call of the front); from there the call's arguments hold the one copy.
	Stdin     io.Reader
	StdinData []byte
}

// Serve serves c as skel's PluginMainFuncsWithError serves a CNI call, with the same
// checks, codes and messages (TestServeAnswersAsSkel), and with p's verbs. It returns
// nil, a *types.Error the caller prints with PrintError before exiting 1, or a
// *HandOff from one of p's dependencies. Without CNI_COMMAND it prints about, when not
// empty, and the CNI versions the plugin speaks on p.Stderr.
func (p *Plugin) Serve(c *Call, about string) error {
	cc := newCNICall(c, p.Stdout, p.Stderr, p.NetNS)
	if cc.stdin == nil && cc.stdinData == nil {
		cc.stdinData = []byte{}
	}
	return serveKeeping[*HandOff](cc, p.Funcs(), about)
}

// serveKeeping serves cc with funcs. When a verb returns an error of type E, it
// returns that error as it was, which the dispatcher would have made a CNI error;
// else the dispatcher's CNI error, or nil.
func serveKeeping[E error](cc *cniCall, funcs Funcs, about string) error {
	var kept E
	found := false
	keep := func(fn func(*CmdArgs) error) func(*CmdArgs) error {
		return func(a *CmdArgs) error {
			err := fn(a)
			if errors.As(err, &kept) {
				found = true
				return kept
			}
			return err
		}
	}
	funcs.Add, funcs.Del, funcs.Check, funcs.GC, funcs.Status = keep(funcs.Add), keep(funcs.Del), keep(funcs.Check), keep(funcs.GC), keep(funcs.Status)
	e := cc.serve(funcs, SupportedVersions, about)
	if found {
		return kept
	}
	if e != nil {
		return e
	}
	return nil
}

// Dispatch is Serve with funcs for the verbs: the dispatcher alone, for a test that
// holds it to skel's.
func Dispatch(c *Call, stdout, stderr io.Writer, netns func(string) string, funcs Funcs, about string) *types.Error {
	return newCNICall(c, stdout, stderr, netns).serve(funcs, SupportedVersions, about)
}

func newCNICall(c *Call, stdout, stderr io.Writer, netns func(string) string) *cniCall {
	return &cniCall{getenv: c.Getenv, stdin: c.Stdin, stdinData: c.StdinData, stdout: stdout, stderr: stderr, netns: netns}
}

// cniCall is where a CNI call comes from and goes to.
type cniCall struct {
	getenv func(string) string
	// stdin is read for the network configuration, unless stdinData holds it already
	// (a call of the front); args takes it from there, so that the call holds one copy.
	stdin          io.Reader
	stdinData      []byte
	stdout, stderr io.Writer
	// netns tells how CNI_NETNS relates to the plugin's own network namespace.
	netns func(path string) string
}

// The CNI_* variables, in the order they are checked, and the verbs that need each.
var cniEnv = []struct {
	name     string
	required []string
	validate func(string) *types.Error
	// validateFor are the verbs whose value is validated.
	validateFor []string
}{
	{name: "CNI_COMMAND", required: []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}},
	{name: "CNI_CONTAINERID", required: []string{"ADD", "CHECK", "DEL"}, validate: validateContainerID, validateFor: []string{"ADD", "CHECK", "DEL"}},
	{name: "CNI_NETNS", required: []string{"ADD", "CHECK"}},
	{name: "CNI_IFNAME", required: []string{"ADD", "CHECK", "DEL"}, validate: validateInterfaceName, validateFor: []string{"ADD", "CHECK", "DEL"}},
	{name: "CNI_ARGS"},
	{name: "CNI_PATH", required: []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}},
	{name: "CNI_NETNS_OVERRIDE"},
}

func has(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// args reads the CNI call: the verb, its environment and stdin.
func (c *cniCall) args() (string, *CmdArgs, *types.Error) {
	cmd := c.getenv("CNI_COMMAND")
	vals := make(map[string]string, len(cniEnv))
	var missing []string
	for _, v := range cniEnv {
		val := c.getenv(v.name)
		vals[v.name] = val
		if val == "" {
			if has(v.required, cmd) || v.name == "CNI_COMMAND" {
				missing = append(missing, v.name)
			}
		} else if v.validate != nil && has(v.validateFor, cmd) {
			if err := v.validate(val); err != nil {
				return "", nil, err
			}
		}
	}
	if len(missing) > 0 {
		return "", nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("required env variables [%s] missing", strings.Join(missing, ",")), "")
	}
	var stdin []byte
	if cmd != "VERSION" {
		if stdin, c.stdinData = c.stdinData, nil; stdin == nil {
			var err error
			if stdin, err = io.ReadAll(c.stdin); err != nil {
				return "", nil, types.NewError(types.ErrIOFailure, fmt.Sprintf("error reading from stdin: %v", err), "")
			}
		}
		if err := validateNetworkConfig(stdin); err != nil {
			return "", nil, err
		}
	}
	return cmd, &CmdArgs{
		ContainerID:   vals["CNI_CONTAINERID"],
		Netns:         vals["CNI_NETNS"],
		IfName:        vals["CNI_IFNAME"],
		Args:          vals["CNI_ARGS"],
		Path:          vals["CNI_PATH"],
		NetnsOverride: vals["CNI_NETNS_OVERRIDE"],
		StdinData:     stdin,
	}, nil
}

func (c *cniCall) serve(funcs Funcs, versions version.PluginInfo, about string) *types.Error {
	cmd, args, err := c.args()
	if err != nil {
		if err.Code == types.ErrInvalidEnvironmentVariables && c.getenv("CNI_COMMAND") == "" && about != "" {
			_, _ = fmt.Fprintln(c.stderr, about)
			_, _ = fmt.Fprintf(c.stderr, "CNI protocol versions supported: %s\n", strings.Join(versions.SupportedVersions(), ", "))
			return nil
		}
		return err
	}
	switch cmd {
	case "ADD", "DEL":
		fn := funcs.Add
		if cmd == "DEL" {
			fn = funcs.Del
		}
		if err := callVerb(args, versions, fn); err != nil {
			return err
		}
		if o := args.NetnsOverride; strings.ToUpper(o) != "TRUE" && o != "1" {
			relation := ""
			if c.netns != nil && args.Netns != "" {
				relation = c.netns(args.Netns)
			}
			return refuseOwnNetNS(relation)
		}
		return nil
	case "CHECK":
		return callFrom(args, versions, funcs.Check, "CHECK", "0.4.0")
	case "GC":
		return callFrom(args, versions, funcs.GC, "GC", "1.1.0")
	case "STATUS":
		return callFrom(args, versions, funcs.Status, "STATUS", "1.1.0")
	case "VERSION":
		if err := versions.Encode(c.stdout); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		return nil
	}
	return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}

// callVerb runs fn once the configuration's cniVersion is one the plugin speaks.
func callVerb(args *CmdArgs, versions version.PluginInfo, fn func(*CmdArgs) error) *types.Error {
	confVersion, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if verr := (&version.Reconciler{}).Check(confVersion, versions); verr != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions", verr.Details())
	}
	if fn == nil {
		return nil
	}
	if err := fn(args); err != nil {
		var e *types.Error
		if errors.As(err, &e) {
			return e
		}
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

// callFrom is callVerb for a verb that exists from CNI version since on.
func callFrom(args *CmdArgs, versions version.PluginInfo, fn func(*CmdArgs) error, verb, since string) *types.Error {
	confVersion, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if ok, err := version.GreaterThanOrEqualTo(confVersion, since); err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	} else if !ok {
		return types.NewError(types.ErrIncompatibleCNIVersion, "config version does not allow "+verb, "")
	}
	for _, v := range versions.SupportedVersions() {
		ok, err := version.GreaterThanOrEqualTo(v, confVersion)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, err.Error(), "")
		}
		if ok {
			return callVerb(args, versions, fn)
		}
	}
	return types.NewError(types.ErrIncompatibleCNIVersion, "plugin version does not allow "+verb, "")
}

// validateNetworkConfig checks the configuration's name, as any CNI plugin does first.
func validateNetworkConfig(stdin []byte) *types.Error {
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("error unmarshall network config: %v", err), "")
	}
	if conf.Name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "missing network name", "")
	}
	if !validName(conf.Name) {
		return types.NewError(types.ErrInvalidNetworkConfig, "invalid characters found in network name", conf.Name)
	}
	return nil
}

// validName is the CNI specification's rule for container IDs and network names: a
// letter or digit, then letters, digits, '_', '.' and '-'.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || b != '_' && b != '.' && b != '-') {
			return false
		}
	}
	return s != ""
}

func validateContainerID(id string) *types.Error {
	if !validName(id) {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "invalid characters in containerID", id)
	}
	return nil
}

// maxInterfaceNameLength is the kernel's IFNAMSIZ less its terminating NUL.
const maxInterfaceNameLength = 15

func validateInterfaceName(name string) *types.Error {
	if len(name) > maxInterfaceNameLength {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name is too long", fmt.Sprintf("interface name should be less than %d characters", maxInterfaceNameLength+1))
	}
	if name == "." || name == ".." {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name is . or ..", "")
	}
	for _, r := range name {
		if r == '/' || r == ':' || unicode.IsSpace(r) {
			return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name contains / or : or whitespace characters", "")
		}
	}
	return nil
}

// refuseOwnNetNS is the CNI library's check after ADD and DEL: CNI_NETNS must not be
// the plugin's own network namespace.
func refuseOwnNetNS(relation string) *types.Error {
	switch relation {
	case api.NetNSSame:
		return types.NewError(types.ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
	case api.NetNSNoSelf:
		return types.NewError(types.ErrInvalidNetNS, "get plugin's netns failed", "")
	}
	return nil
}
