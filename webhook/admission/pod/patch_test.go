package pod_test

import jsonpatch "gopkg.in/evanphx/json-patch.v4"

func jsonPatch(doc, ops []byte) ([]byte, error) {
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return nil, err
	}
	return p.Apply(doc)
}
