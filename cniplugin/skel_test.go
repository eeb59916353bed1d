package cniplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/cniplugin/cni"
)

// twinEnv makes this test binary serve one CNI call and exit, with skel
// (containernetworking/cni's pkg/skel, the version go.mod pins) or with the plugin's
// dispatcher (cni.Dispatch, with the process's netns check), both over the same
// recording verbs: TestServeAnswersAsSkel compares what each prints and its exit code.
const twinEnv = "NICPOOL_TEST_SKEL_TWIN"

const twinAbout = "twin about"

func TestMain(m *testing.M) {
	switch os.Getenv(twinEnv) {
	case "":
		os.Exit(m.Run())
	case "skel":
		skel.PluginMainFuncs(skel.CNIFuncs{Add: record[skel.CmdArgs]("ADD"), Del: record[skel.CmdArgs]("DEL"), Check: record[skel.CmdArgs]("CHECK"), GC: record[skel.CmdArgs]("GC"), Status: record[skel.CmdArgs]("STATUS")}, cni.SupportedVersions, twinAbout)
	default:
		funcs := cni.Funcs{Add: record[cni.CmdArgs]("ADD"), Del: record[cni.CmdArgs]("DEL"), Check: record[cni.CmdArgs]("CHECK"), GC: record[cni.CmdArgs]("GC"), Status: record[cni.CmdArgs]("STATUS")}
		if e := cni.Dispatch(&cni.Call{Getenv: os.Getenv, Stdin: os.Stdin}, os.Stdout, os.Stderr, netnsRelation, funcs, twinAbout); e != nil {
			_ = cni.PrintError(os.Stdout, e)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// record is a verb that prints what it was called with, or fails as CNI_ARGS says:
// FAIL=cni a CNI error, FAIL=plain an error of another type.
func record[A any](verb string) func(*A) error {
	return func(a *A) error {
		b, _ := json.Marshal(a)
		fmt.Printf("%s %s\n", verb, b)
		switch args := os.Getenv("CNI_ARGS"); {
		case strings.Contains(args, "FAIL=cni"):
			return types.NewError(101, "the verb failed", "details")
		case strings.Contains(args, "FAIL=plain"):
			return errors.New("a plain failure")
		}
		return nil
	}
}

// TestServeAnswersAsSkel: for every call of the catalogue, the plugin's dispatcher
// (which nicpool-cni and ipamd both serve calls with) prints on stdout and stderr
// what skel prints, exits as skel does, and hands its verbs the same arguments.
func TestServeAnswersAsSkel(t *testing.T) {
	own := "/proc/self/ns/net"
	other := t.TempDir() + "/netns"
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := func(version string) string { return `{"cniVersion":"` + version + `","name":"n1","type":"nicpool"}` }
	env := func(cmd string, extra ...string) []string {
		e := []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=" + other, "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAME=a"}
		return append(e, extra...)
	}
	cases := []struct {
		name, stdin string
		env         []string
	}{
		{"no command", "", nil},
		{"no command, with others", conf("1.0.0"), []string{"CNI_CONTAINERID=c1"}},
		{"unknown command", conf("1.0.0"), env("FROB")},
		{"VERSION", "", []string{"CNI_COMMAND=VERSION"}},
		{"VERSION with stdin", conf("1.0.0"), []string{"CNI_COMMAND=VERSION"}},
		{"ADD", conf("1.0.0"), env("ADD")},
		{"ADD 0.3.0", conf("0.3.0"), env("ADD")},
		{"ADD no version", `{"name":"n1"}`, env("ADD")},
		{"ADD unknown version", conf("9.9.9"), env("ADD")},
		{"ADD bad version", conf("x"), env("ADD")},
		{"ADD missing everything", conf("1.0.0"), []string{"CNI_COMMAND=ADD"}},
		{"ADD missing path", conf("1.0.0"), []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=" + other, "CNI_IFNAME=net1"}},
		{"ADD bad container", conf("1.0.0"), env("ADD", "CNI_CONTAINERID=-c1")},
		{"ADD container with a slash", conf("1.0.0"), env("ADD", "CNI_CONTAINERID=c/1")},
		{"ADD long interface", conf("1.0.0"), env("ADD", "CNI_IFNAME=abcdefghijklmnop")},
		{"ADD interface dot", conf("1.0.0"), env("ADD", "CNI_IFNAME=.")},
		{"ADD interface dotdot", conf("1.0.0"), env("ADD", "CNI_IFNAME=..")},
		{"ADD interface slash", conf("1.0.0"), env("ADD", "CNI_IFNAME=a/b")},
		{"ADD interface colon", conf("1.0.0"), env("ADD", "CNI_IFNAME=a:b")},
		{"ADD interface space", conf("1.0.0"), env("ADD", "CNI_IFNAME=a b")},
		{"ADD not JSON", "{", env("ADD")},
		{"ADD empty stdin", "", env("ADD")},
		{"ADD no name", `{"cniVersion":"1.0.0"}`, env("ADD")},
		{"ADD bad name", `{"cniVersion":"1.0.0","name":"-n"}`, env("ADD")},
		{"ADD name with a slash", `{"cniVersion":"1.0.0","name":"a/b"}`, env("ADD")},
		{"ADD own netns", conf("1.0.0"), env("ADD", "CNI_NETNS="+own)},
		{"ADD own netns overridden", conf("1.0.0"), env("ADD", "CNI_NETNS="+own, "CNI_NETNS_OVERRIDE=true")},
		{"ADD own netns overridden 1", conf("1.0.0"), env("ADD", "CNI_NETNS="+own, "CNI_NETNS_OVERRIDE=1")},
		{"ADD own netns override no", conf("1.0.0"), env("ADD", "CNI_NETNS="+own, "CNI_NETNS_OVERRIDE=0")},
		{"ADD no such netns", conf("1.0.0"), env("ADD", "CNI_NETNS=/nonexistent")},
		{"ADD fails with a CNI error", conf("1.0.0"), env("ADD", "CNI_ARGS=FAIL=cni")},
		{"ADD fails with a plain error", conf("1.0.0"), env("ADD", "CNI_ARGS=FAIL=plain")},
		{"DEL", conf("1.0.0"), env("DEL")},
		{"DEL without netns", conf("1.0.0"), []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_IFNAME=net1", "CNI_PATH=/p"}},
		{"DEL own netns", conf("1.0.0"), env("DEL", "CNI_NETNS="+own)},
		{"DEL fails", conf("1.0.0"), env("DEL", "CNI_ARGS=FAIL=cni")},
		{"CHECK", conf("1.0.0"), env("CHECK")},
		{"CHECK 0.3.1", conf("0.3.1"), env("CHECK")},
		{"CHECK bad version", conf("x"), env("CHECK")},
		{"CHECK own netns", conf("1.0.0"), env("CHECK", "CNI_NETNS="+own)},
		{"CHECK missing netns", conf("1.0.0"), []string{"CNI_COMMAND=CHECK", "CNI_CONTAINERID=c1", "CNI_IFNAME=net1", "CNI_PATH=/p"}},
		{"GC", conf("1.1.0"), []string{"CNI_COMMAND=GC", "CNI_PATH=/p"}},
		{"GC 1.0.0", conf("1.0.0"), []string{"CNI_COMMAND=GC", "CNI_PATH=/p"}},
		{"GC newer than the plugin", conf("1.2.0"), []string{"CNI_COMMAND=GC", "CNI_PATH=/p"}},
		{"GC without path", conf("1.1.0"), []string{"CNI_COMMAND=GC"}},
		{"GC with a bad container it does not need", conf("1.1.0"), []string{"CNI_COMMAND=GC", "CNI_PATH=/p", "CNI_CONTAINERID=-x"}},
		{"STATUS", conf("1.1.0"), []string{"CNI_COMMAND=STATUS", "CNI_PATH=/p"}},
		{"STATUS 0.4.0", conf("0.4.0"), []string{"CNI_COMMAND=STATUS", "CNI_PATH=/p"}},
		{"STATUS fails", conf("1.1.0"), []string{"CNI_COMMAND=STATUS", "CNI_PATH=/p", "CNI_ARGS=FAIL=cni"}},
	}
	run := func(twin string, env []string, stdin string) (string, string, int) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append([]string{twinEnv + "=" + twin}, env...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v", twin, err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantOut, wantErr, wantExit := run("skel", tc.env, tc.stdin)
			gotOut, gotErr, gotExit := run("nicpool", tc.env, tc.stdin)
			if gotOut != wantOut || gotErr != wantErr || gotExit != wantExit {
				t.Errorf("the plugin's dispatcher answers\n  stdout %q\n  stderr %q\n  exit %d\nskel answers\n  stdout %q\n  stderr %q\n  exit %d", gotOut, gotErr, gotExit, wantOut, wantErr, wantExit)
			}
		})
	}
}
