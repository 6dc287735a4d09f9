package schemas

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestPlain converts every sample record: the top-level keys are the
// schema's field names, unions stand unwrapped and times are strings.
func TestPlain(t *testing.T) {
	for name, rec := range testRecords() {
		t.Run(name, func(t *testing.T) {
			p, err := Plain(rec)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := SchemaFor(RecordName(rec))
			if err != nil {
				t.Fatal(err)
			}
			var top struct {
				Fields []struct{ Name string } `json:"fields"`
			}
			if err := json.Unmarshal([]byte(sc.Text), &top); err != nil {
				t.Fatal(err)
			}
			var want, got []string
			for _, f := range top.Fields {
				want = append(want, f.Name)
			}
			for k := range p {
				got = append(got, k)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("keys %v, want the schema's %v", got, want)
			}
			if _, err := json.Marshal(p); err != nil {
				t.Errorf("not JSON: %v", err)
			}
		})
	}
	ev := testEvent(&TableChange{After: testTable("sales", "orders", 2)})
	p, err := Plain(ev)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	var got struct {
		EventTime string  `json:"event_time"`
		Database  *string `json:"database"`
		Payload   struct {
			Before any `json:"before"`
			After  struct {
				Name    string `json:"name"`
				Storage struct {
					NumBuckets int `json:"num_buckets"`
				} `json:"storage"`
			} `json:"after"`
		} `json:"payload"`
		PreviousEventID *int64 `json:"previous_event_id"`
		Op              string `json:"op"`
		SourceInfo      struct {
			Name      string `json:"name"`
			EventTime string `json:"event_time"`
			Table     string `json:"table"`
		} `json:"source_info"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	wantTime := t0.UTC().Format(PlainTimeLayout)
	if got.EventTime != wantTime || got.Database == nil || *got.Database != "sales" || got.Payload.Before != nil ||
		got.Payload.After.Name != "orders" || got.PreviousEventID == nil || *got.PreviousEventID != 998 || got.Op != "u" ||
		got.SourceInfo.Name != "prod-hms" || got.SourceInfo.EventTime != wantTime || got.SourceInfo.Table != "orders" {
		t.Errorf("plain event: %s", b)
	}
}
