// Package tilt evaluates nicpool's Tiltfile with go.starlark.net (the interpreter
// Tilt embeds) and stand-ins for the Tilt builtins the Tiltfile calls. The
// stand-ins record what Tilt would be asked to do (resources, image builds, YAML),
// so a test can check it against the repository without Tilt, Docker or a cluster.
package tilt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// LocalResource is one local_resource call.
type LocalResource struct {
	Name, Cmd, ServeCmd string
	Deps, ResourceDeps  []string
	// ReadinessExec is the command of an exec readiness probe, if any.
	ReadinessExec []string
	// Manual is true for resources that run only when triggered.
	Manual bool
}

// Image is one docker_build call.
type Image struct {
	Ref, Context, Dockerfile string
	Ignore                   []string
}

// CustomBuild is one custom_build call.
type CustomBuild struct {
	Ref, Command                  string
	Deps                          []string
	SkipsLocalDocker, DisablePush bool
}

// K8sResource is one k8s_resource call.
type K8sResource struct {
	// Workload names a rendered Deployment or DaemonSet; NewName a resource made
	// of Objects only.
	Workload, NewName                   string
	Objects, PortForwards, ResourceDeps []string
}

// Name is the resource's name in Tilt.
func (r K8sResource) Name() string {
	if r.NewName != "" {
		return r.NewName
	}
	return r.Workload
}

// Result is everything one evaluation asked of Tilt.
type Result struct {
	LocalResources []LocalResource
	Images         []Image
	CustomBuilds   []CustomBuild
	K8sResources   []K8sResource
	// YAML are the blobs passed to k8s_yaml.
	YAML []string
	// Kustomizations are the directories passed to kustomize.
	Kustomizations []string
	WatchedFiles   []string
	// Defined are the config settings the Tiltfile defines (`tilt up -- --name=…`).
	Defined []string
	// AllowedContexts are the kube contexts passed to allow_k8s_contexts.
	AllowedContexts []string
}

// Options of one evaluation.
type Options struct {
	// Root is the directory of the Tiltfile (the repository root).
	Root string
	// Args are the `tilt up -- --name=value` settings.
	Args map[string]string
	// Kustomize renders a kustomization directory (relative to Root) to YAML, as
	// Tilt's kustomize() does.
	Kustomize func(dir string) (string, error)
	// K8sContext is the current kube context, as Tilt's k8s_context() returns it.
	K8sContext string
}

// Evaluate runs Root/Tiltfile.
func Evaluate(opts Options) (*Result, error) {
	path := filepath.Join(opts.Root, "Tiltfile")
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Result{}
	thread := &starlark.Thread{
		Name: "Tiltfile",
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, fmt.Errorf("load() is not used by nicpool's Tiltfile (extensions need network access)")
		},
	}
	// Tilt's dialect: top-level if/for, reassignable globals, sets.
	fileOpts := &syntax.FileOptions{TopLevelControl: true, GlobalReassign: true, Set: true, While: true}
	_, err = starlark.ExecFileOptions(fileOpts, thread, path, src, r.builtins(opts))
	if err != nil {
		if e := (*starlark.EvalError)(nil); errors.As(err, &e) {
			return r, fmt.Errorf("%s", e.Backtrace())
		}
		return r, err
	}
	return r, nil
}

func stringList(v starlark.Value) ([]string, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	if s, ok := starlark.AsString(v); ok {
		return []string{s}, nil
	}
	it, ok := v.(starlark.Iterable)
	if !ok {
		return nil, fmt.Errorf("want a string or a list of strings, got %s", v.Type())
	}
	var out []string
	iter := it.Iterate()
	defer iter.Done()
	var x starlark.Value
	for iter.Next(&x) {
		s, ok := starlark.AsString(x)
		if !ok {
			return nil, fmt.Errorf("want strings, got %s", x.Type())
		}
		out = append(out, s)
	}
	return out, nil
}

func builtin(name string, f func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		v, err := f(args, kwargs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
		if v == nil {
			v = starlark.None
		}
		return v, nil
	})
}

func (r *Result) builtins(opts Options) starlark.StringDict {
	settings := starlark.NewDict(len(opts.Args))
	for k, v := range opts.Args {
		_ = settings.SetKey(starlark.String(k), starlark.String(v))
	}
	define := func(name string) *starlark.Builtin {
		return builtin("config."+name, func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var setting, usage string
			var positional bool
			if err := starlark.UnpackArgs(name, args, kwargs, "name", &setting, "args?", &positional, "usage?", &usage); err != nil {
				return nil, err
			}
			r.Defined = append(r.Defined, setting)
			return nil, nil
		})
	}
	config := &starlarkstruct.Module{Name: "config", Members: starlark.StringDict{
		"define_string":      define("define_string"),
		"define_bool":        define("define_bool"),
		"define_string_list": define("define_string_list"),
		"parse": builtin("config.parse", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			for k := range opts.Args {
				if !slices.Contains(r.Defined, k) {
					return nil, fmt.Errorf("setting --%s is not defined by the Tiltfile", k)
				}
			}
			return settings, nil
		}),
	}}
	return starlark.StringDict{
		"config":              config,
		"TRIGGER_MODE_AUTO":   starlark.MakeInt(0),
		"TRIGGER_MODE_MANUAL": starlark.MakeInt(1),
		"probe": builtin("probe", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 {
				return nil, fmt.Errorf("probe takes keyword arguments only")
			}
			return starlarkstruct.FromKeywords(starlark.String("probe"), kwargs), nil
		}),
		"exec_action": builtin("exec_action", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var command *starlark.List
			if err := starlark.UnpackArgs("exec_action", args, kwargs, "command", &command); err != nil {
				return nil, err
			}
			return starlarkstruct.FromStringDict(starlark.String("exec_action"), starlark.StringDict{"command": command}), nil
		}),
		"local_resource": builtin("local_resource", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var (
				name, cmd, serveCmd, dir, serveDir        string
				deps, resourceDeps, labels, links, ignore starlark.Value
				probe                                     starlark.Value
				trigger                                   int
				autoInit, allowParallel                   = true, false
			)
			if err := starlark.UnpackArgs("local_resource", args, kwargs,
				"name", &name, "cmd?", &cmd, "deps?", &deps, "trigger_mode?", &trigger, "resource_deps?", &resourceDeps,
				"ignore?", &ignore, "auto_init?", &autoInit, "serve_cmd?", &serveCmd, "allow_parallel?", &allowParallel,
				"links?", &links, "labels?", &labels, "dir?", &dir, "serve_dir?", &serveDir, "readiness_probe?", &probe); err != nil {
				return nil, err
			}
			lr := LocalResource{Name: name, Cmd: cmd, ServeCmd: serveCmd, Manual: trigger == 1 && !autoInit}
			var err error
			if lr.Deps, err = stringList(deps); err != nil {
				return nil, err
			}
			if lr.ResourceDeps, err = stringList(resourceDeps); err != nil {
				return nil, err
			}
			if p, ok := probe.(*starlarkstruct.Struct); ok {
				if ex, err := p.Attr("exec"); err == nil {
					if ea, ok := ex.(*starlarkstruct.Struct); ok {
						c, _ := ea.Attr("command")
						if lr.ReadinessExec, err = stringList(c); err != nil {
							return nil, err
						}
					}
				}
			}
			r.LocalResources = append(r.LocalResources, lr)
			return nil, nil
		}),
		"docker_build": builtin("docker_build", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var ref, context, dockerfile string
			var ignore, only, buildArgs starlark.Value
			if err := starlark.UnpackArgs("docker_build", args, kwargs, "ref", &ref, "context", &context,
				"dockerfile?", &dockerfile, "ignore?", &ignore, "only?", &only, "build_args?", &buildArgs); err != nil {
				return nil, err
			}
			if dockerfile == "" {
				dockerfile = filepath.Join(context, "Dockerfile")
			}
			ig, err := stringList(ignore)
			if err != nil {
				return nil, err
			}
			r.Images = append(r.Images, Image{Ref: ref, Context: context, Dockerfile: dockerfile, Ignore: ig})
			return nil, nil
		}),
		"custom_build": builtin("custom_build", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var ref, command, tag, commandBat, outputsRefTo, dir string
			var deps, liveUpdate, ignore, entrypoint, containerArgs, imageDeps, env starlark.Value
			var skipsLocalDocker, disablePush, matchInEnvVars bool
			if err := starlark.UnpackArgs("custom_build", args, kwargs, "ref", &ref, "command", &command, "deps", &deps,
				"tag?", &tag, "disable_push?", &disablePush, "skips_local_docker?", &skipsLocalDocker,
				"live_update?", &liveUpdate, "match_in_env_vars?", &matchInEnvVars, "ignore?", &ignore,
				"entrypoint?", &entrypoint, "command_bat?", &commandBat, "outputs_image_ref_to?", &outputsRefTo,
				"container_args?", &containerArgs, "image_deps?", &imageDeps, "env?", &env, "dir?", &dir); err != nil {
				return nil, err
			}
			cb := CustomBuild{Ref: ref, Command: command, SkipsLocalDocker: skipsLocalDocker, DisablePush: disablePush}
			var err error
			if cb.Deps, err = stringList(deps); err != nil {
				return nil, err
			}
			r.CustomBuilds = append(r.CustomBuilds, cb)
			return nil, nil
		}),
		"allow_k8s_contexts": builtin("allow_k8s_contexts", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var contexts starlark.Value
			if err := starlark.UnpackArgs("allow_k8s_contexts", args, kwargs, "contexts", &contexts); err != nil {
				return nil, err
			}
			cs, err := stringList(contexts)
			if err != nil {
				return nil, err
			}
			r.AllowedContexts = append(r.AllowedContexts, cs...)
			return nil, nil
		}),
		"k8s_context": builtin("k8s_context", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := starlark.UnpackArgs("k8s_context", args, kwargs); err != nil {
				return nil, err
			}
			return starlark.String(opts.K8sContext), nil
		}),
		"kustomize": builtin("kustomize", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var dir string
			if err := starlark.UnpackArgs("kustomize", args, kwargs, "paths", &dir); err != nil {
				return nil, err
			}
			r.Kustomizations = append(r.Kustomizations, dir)
			y, err := opts.Kustomize(dir)
			if err != nil {
				return nil, err
			}
			return starlark.String(y), nil
		}),
		"k8s_yaml": builtin("k8s_yaml", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var blob starlark.String
			if err := starlark.UnpackArgs("k8s_yaml", args, kwargs, "yaml", &blob); err != nil {
				return nil, err
			}
			r.YAML = append(r.YAML, string(blob))
			return nil, nil
		}),
		"k8s_resource": builtin("k8s_resource", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var workload, newName string
			var objects, portForwards, resourceDeps, labels, links starlark.Value
			if err := starlark.UnpackArgs("k8s_resource", args, kwargs, "workload?", &workload, "new_name?", &newName,
				"port_forwards?", &portForwards, "resource_deps?", &resourceDeps, "objects?", &objects,
				"labels?", &labels, "links?", &links); err != nil {
				return nil, err
			}
			res := K8sResource{Workload: workload, NewName: newName}
			var err error
			if res.Objects, err = stringList(objects); err != nil {
				return nil, err
			}
			if res.PortForwards, err = stringList(portForwards); err != nil {
				return nil, err
			}
			if res.ResourceDeps, err = stringList(resourceDeps); err != nil {
				return nil, err
			}
			r.K8sResources = append(r.K8sResources, res)
			return nil, nil
		}),
		"watch_file": builtin("watch_file", func(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var path string
			if err := starlark.UnpackArgs("watch_file", args, kwargs, "file_path", &path); err != nil {
				return nil, err
			}
			r.WatchedFiles = append(r.WatchedFiles, path)
			return nil, nil
		}),
	}
}
