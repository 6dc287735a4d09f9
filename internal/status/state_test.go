package status

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStateSpelling checks that every state is one snake_case word and
// that the table and -json spell each database's and the tailer's state
// the same.
func TestStateSpelling(t *testing.T) {
	word := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	for _, s := range append(DatabaseStates, TailerRunning, TailerBehind, TailerDown, TailerNoCheckpoint) {
		if !word.MatchString(string(s)) {
			t.Errorf("state %q is not a snake_case word", s)
		}
	}
	r := &Report{Time: time.Now(), Tailer: Tailer{Source: "primary", State: TailerNoCheckpoint}}
	for i, s := range DatabaseStates {
		r.Databases = append(r.Databases, Database{Database: "db" + string(rune('a'+i)), State: s})
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tailer    struct{ State string }
		Databases []struct {
			Database string
			State    string
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Tailer.State != string(TailerNoCheckpoint) {
		t.Errorf("JSON tailer state %q, want %q", got.Tailer.State, TailerNoCheckpoint)
	}
	if len(got.Databases) != len(DatabaseStates) {
		t.Fatalf("JSON has %d databases, want %d", len(got.Databases), len(DatabaseStates))
	}
	rows := map[string]string{} // database -> the table's last column
	for _, line := range strings.Split(text.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			rows[f[0]] = f[len(f)-1]
		}
	}
	for _, d := range got.Databases {
		if rows[d.Database] != d.State {
			t.Errorf("%s: the table says %q, JSON %q", d.Database, rows[d.Database], d.State)
		}
	}
}
