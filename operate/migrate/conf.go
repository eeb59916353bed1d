package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nicpool/nicpool/crds/ipamconf"
)

// SpiderpoolConf is the ConfigMap spiderpool's chart installs in its release's
// namespace (chart value global.configName), whose conf.yml holds its IPAM switches.
const SpiderpoolConf = "spiderpool-conf"

// Setting is one of spiderpool-conf's IPAM switches and the nicpool setting that
// carries it over.
type Setting struct {
	// Key is spiderpool-conf's key, which is also nicpool's chart value under ipam.
	Key string `json:"key"`
	// Value is spiderpool-conf's value (and so nicpool's).
	Value bool `json:"value"`
	// Flag is the webhook's and ipamd's flag with the value.
	Flag string `json:"flag"`
	// chartValue is the chart's value of the switch (ipam.<Key>).
	chartValue string
}

// Switches is what the migration found of spiderpool-conf's IPAM switches.
type Switches struct {
	// Source is namespace/name of the ConfigMap read; empty when none was found and
	// the switches are the migration's flags.
	Source string `json:"source,omitempty"`
	// Settings are the three switches as nicpool settings, in a fixed order.
	Settings []Setting `json:"settings"`
	// switches are the settings as nicpool reads them (the pod annotations the
	// migration writes are decided with them).
	switches ipamconf.Switches
}

// readConf reads the switches of conf.yml, each under its key in ipamconf.Settings.
// spiderpool reads conf.yml into plain booleans: a key that is absent is false there.
func readConf(raw string) (ipamconf.Switches, error) {
	var keys map[string]json.RawMessage
	if err := yaml.Unmarshal([]byte(raw), &keys); err != nil {
		return ipamconf.Switches{}, err
	}
	var sw ipamconf.Switches
	for _, st := range ipamconf.Settings {
		var on bool
		if v, ok := keys[st.Key]; ok {
			if err := json.Unmarshal(v, &on); err != nil {
				return ipamconf.Switches{}, fmt.Errorf("%s: want true or false: %w", st.Key, err)
			}
		}
		st.Set(&sw, on)
	}
	return sw, nil
}

// ReadSwitches finds spiderpool-conf in any namespace and reads its switches. With none
// (spiderpool is uninstalled already: helm uninstall deletes it), the switches are
// given, the migration's flags; when one is found, given switches set explicitly
// (explicit) must agree with it. Problems are blockers.
func ReadSwitches(ctx context.Context, r client.Reader, given ipamconf.Switches, explicit bool) (Switches, []Problem, error) {
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", SpiderpoolConf)}); err != nil {
		return Switches{}, nil, fmt.Errorf("list ConfigMaps named %s: %w", SpiderpoolConf, err)
	}
	switch len(list.Items) {
	case 0:
		return switchesOf("", given), nil, nil
	case 1:
	default:
		var where []string
		for _, cm := range list.Items {
			where = append(where, cm.Namespace+"/"+cm.Name)
		}
		return switchesOf("", given), []Problem{{
			Message: fmt.Sprintf("%d ConfigMaps named %s (%s): the migration cannot tell which spiderpool ran with", len(list.Items), SpiderpoolConf, strings.Join(where, ", ")),
			Fix:     "delete those of no spiderpool installation",
		}}, nil
	}
	cm := list.Items[0]
	source := cm.Namespace + "/" + cm.Name
	raw, ok := cm.Data["conf.yml"]
	conf, err := readConf(raw)
	if !ok || err != nil {
		why := "has no conf.yml"
		if err != nil {
			why = fmt.Sprintf("conf.yml does not parse: %v", err)
		}
		return switchesOf("", given), []Problem{{
			Message: fmt.Sprintf("ConfigMap %s %s, so spiderpool's IPAM switches are unknown", source, why),
			Fix:     fmt.Sprintf("repair it (kubectl edit configmap -n %s %s) or delete it and give the migration spiderpool's switches (%s)", cm.Namespace, cm.Name, settingFlags()),
		}}, nil
	}
	found := switchesOf(source, conf)
	var blockers []Problem
	if err := found.switches.Validate(); err != nil {
		blockers = append(blockers, Problem{Message: fmt.Sprintf("%s sets %s and %s false: nicpool needs one family", source, ipamconf.KeyIPv4, ipamconf.KeyIPv6)})
	}
	if explicit && given != found.switches {
		blockers = append(blockers, Problem{
			Message: fmt.Sprintf("the switches given (%s) differ from %s's (%s)", flags(switchesOf("", given)), source, flags(found)),
			Fix:     "give the migration spiderpool's switches, or none",
		})
	}
	return found, blockers, nil
}

func switchesOf(source string, sw ipamconf.Switches) Switches {
	s := Switches{Source: source, switches: sw}
	for _, st := range ipamconf.Settings {
		s.Settings = append(s.Settings, Setting{Key: st.Key, Value: st.Enabled(sw), Flag: st.FlagArg(sw), chartValue: st.ChartValue()})
	}
	return s
}

// settingFlags lists the switches' flags: --enable-ipv4, --enable-ipv6, ...
func settingFlags() string {
	var fl []string
	for _, st := range ipamconf.Settings {
		fl = append(fl, "--"+st.Flag)
	}
	return strings.Join(fl, ", ")
}

func flags(s Switches) string {
	var out []string
	for _, st := range s.Settings {
		out = append(out, st.Flag)
	}
	return strings.Join(out, " ")
}

// Install says how to install nicpool with these switches: the chart's values, and the
// flags kustomize's manifests take (in the webhook Deployment's and the ipamd
// DaemonSet's args). Empty when every switch is nicpool's default.
func (s Switches) Install() []string {
	var sets, fl []string
	for _, st := range s.Settings {
		if !st.Value {
			sets = append(sets, "--set "+st.chartValue+"=false")
			fl = append(fl, st.Flag)
		}
	}
	if len(sets) == 0 {
		return nil
	}
	return []string{
		"this migration, once spiderpool-conf is gone (helm uninstall deletes it): kubectl nicpool migrate from-spiderpool --apply " + strings.Join(fl, " "),
		"helm: helm install nicpool <chart> -n nicpool-system " + strings.Join(sets, " "),
		"kustomize: " + strings.Join(fl, " ") + " in the args of the nicpool-webhook Deployment and of the nicpool-ipamd DaemonSet (manifests/base/webhook.yaml, ipamd.yaml)",
	}
}
