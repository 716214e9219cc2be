package labelproxy

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
)

// Kubernetes protobuf bodies (what kubectl create and other typed clients send) are labelled at the
// wire level, without decoding the object: protobuf merges an embedded message that appears twice,
// and a later map entry replaces an earlier one with the same key. So appending
//
//	metadata(1) { labels(11) { key: value } }
//
// to the object's bytes adds the labels and keeps everything else exactly as sent — including fields
// newer than this build's client-go, which a decode and re-encode would drop. Field numbers are those
// of k8s.io/api (every stored object has ObjectMeta metadata = 1; ObjectMeta has labels = 11).

// protoMagic starts every Kubernetes protobuf body; a runtime.Unknown envelope follows.
var protoMagic = []byte("k8s\x00")

// protoTemplates are the field paths of pod templates (and a CronJob's Job template) in protobuf,
// ending at the template message whose metadata(1) gets the labels.
func protoTemplates(group, resource string) [][]uint64 {
	switch {
	case group == "apps" && (resource == "deployments" || resource == "statefulsets" || resource == "replicasets"):
		return [][]uint64{{2, 3}} // spec.template
	case group == "apps" && resource == "daemonsets":
		return [][]uint64{{2, 2}} // spec.template
	case group == "batch" && resource == "jobs":
		return [][]uint64{{2, 6}} // spec.template
	case group == "batch" && resource == "cronjobs":
		return [][]uint64{{2, 5}, {2, 5, 2, 6}} // spec.jobTemplate, spec.jobTemplate.spec.template
	}
	return nil
}

// rewriteProtobuf labels a protobuf create (POST) or update (PUT) body; ok is false when the body is
// not a Kubernetes protobuf object (it is then forwarded as it came).
func (l labeler) rewriteProtobuf(method string, t target, body []byte) ([]byte, bool) {
	if !bytes.HasPrefix(body, protoMagic) {
		return nil, false
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(body[len(protoMagic):]); err != nil || len(unk.Raw) == 0 {
		return nil, false
	}
	if unk.ContentEncoding != "" || (unk.ContentType != "" && unk.ContentType != "application/vnd.kubernetes.protobuf") {
		return nil, false
	}
	entries := protoLabelEntries(l.labels)
	raw := append([]byte{}, unk.Raw...)
	raw = appendNested(raw, []uint64{1}, protoLabelEntries(l.metadataLabels(t)))
	for _, p := range protoTemplates(t.group, t.resource) {
		// A Job's pod template cannot change after creation.
		if t.group == "batch" && t.resource == "jobs" && method != http.MethodPost {
			continue
		}
		raw = appendNested(raw, append(append([]uint64{}, p...), 1), entries)
	}
	unk.Raw = raw
	out, err := unk.Marshal()
	if err != nil {
		return nil, false
	}
	return append(append([]byte{}, protoMagic...), out...), true
}

// protoLabelEntries encodes labels as ObjectMeta.labels map entries, in a stable order.
func protoLabelEntries(labels map[string]string) []byte {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []byte
	for _, k := range keys {
		var entry []byte
		entry = appendBytesField(entry, 1, []byte(k))
		entry = appendBytesField(entry, 2, []byte(labels[k]))
		out = appendBytesField(out, 11, entry)
	}
	return out
}

// appendNested appends field path[0] { path[1] { ... { content } } } to msg.
func appendNested(msg []byte, path []uint64, content []byte) []byte {
	for i := len(path) - 1; i >= 0; i-- {
		content = appendBytesField(nil, path[i], content)
	}
	return append(msg, content...)
}

func appendBytesField(b []byte, field uint64, v []byte) []byte {
	b = binary.AppendUvarint(b, field<<3|2) // wire type 2: length-delimited
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
