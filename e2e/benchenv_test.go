package e2e

import (
	"os"
	"strconv"
	"testing"
)

// Settings and conditions of the benchmarks (build tags benchlag,
// benchmem, benchbootstrap), read from the environment.

func envNumber(t *testing.T, key string, def float64) float64 {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive number", key, s)
	}
	return v
}

// envShare reads a fraction in [0, 1] from the environment.
func envShare(t *testing.T, key string, def float64) float64 {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v > 1 {
		t.Fatalf("%s=%q: want a fraction from 0 to 1", key, s)
	}
	return v
}
