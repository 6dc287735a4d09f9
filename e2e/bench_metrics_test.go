//go:build benchlag || benchbootstrap || benchscale || benchiceberg

package e2e

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The benchmarks' reading of the daemons' metrics: a scrape before and
// after a run, and what histograms and counters say of the run.

// drCalls reports the applier's calls to the DR metastore between the two
// scrapes (hivedr_applier_dr_call_seconds): per call, how many, per event
// of the n, and their mean, p50 and p99 time, and their share of the time
// all calls took.
func drCalls(before, after map[string]float64, n int) string {
	const name = "hivedr_applier_dr_call_seconds"
	calls := map[string]bool{}
	for s := range after {
		if strings.HasPrefix(s, name+"_count{") {
			calls[seriesLabels(s)["call"]] = true
		}
	}
	var names []string
	var total float64
	for c := range calls {
		names = append(names, c)
		total += histSum(before, after, name, map[string]string{"call": c})
	}
	sort.Slice(names, func(i, j int) bool {
		return histSum(before, after, name, map[string]string{"call": names[i]}) > histSum(before, after, name, map[string]string{"call": names[j]})
	})
	var b strings.Builder
	fmt.Fprintf(&b, "  DR calls (hivedr_applier_dr_call_seconds; %d events): %.0f s in all", n, total)
	for _, c := range names {
		l := map[string]string{"call": c}
		k, sum := histCount(before, after, name, l), histSum(before, after, name, l)
		if k == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n    %-24s %7.0f calls (%.3f per event)  mean %s  p50 %s  p99 %s  %4.1f%% of the time", c, k, k/float64(max(1, n)),
			fmtSec(sum/k), fmtSec(histQuantile(before, after, name, l, .5)), fmtSec(histQuantile(before, after, name, l, .99)), 100*sum/max(total, 1e-9))
	}
	return b.String()
}

// scrapeMetrics reads a Prometheus text exposition into series -> value,
// the series named as exposed (name{labels}) less the pipeline label
// (withoutPipeline).
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, l := range strings.Split(httpGet(t, url), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			out[withoutPipeline(l[:i])] = v
		}
	}
	return out
}

var seriesLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

func seriesLabels(series string) map[string]string {
	out := map[string]string{}
	for _, m := range seriesLabel.FindAllStringSubmatch(series, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func labelsMatch(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// histDelta sums the series of a metric with the given suffix (_count,
// _sum) and labels over all other labels, after minus before.
func histDelta(before, after map[string]float64, name, suffix string, want map[string]string) float64 {
	var v float64
	for s, x := range after {
		if !strings.HasPrefix(s, name+suffix+"{") && s != name+suffix {
			continue
		}
		if labelsMatch(seriesLabels(s), want) {
			v += x - before[s]
		}
	}
	return v
}

func histCount(before, after map[string]float64, name string, want map[string]string) float64 {
	return histDelta(before, after, name, "_count", want)
}

func histSum(before, after map[string]float64, name string, want map[string]string) float64 {
	return histDelta(before, after, name, "_sum", want)
}

// histQuantile estimates a quantile of what a histogram observed between
// the two scrapes, interpolating within buckets as histogram_quantile does.
func histQuantile(before, after map[string]float64, name string, want map[string]string, q float64) float64 {
	buckets := map[float64]float64{}
	for s, x := range after {
		if !strings.HasPrefix(s, name+"_bucket{") {
			continue
		}
		ls := seriesLabels(s)
		if !labelsMatch(ls, want) {
			continue
		}
		le, err := strconv.ParseFloat(ls["le"], 64)
		if ls["le"] == "+Inf" {
			le, err = math.Inf(1), nil
		}
		if err != nil {
			continue
		}
		buckets[le] += x - before[s]
	}
	var les []float64
	for le := range buckets {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 || buckets[les[len(les)-1]] == 0 {
		return math.NaN()
	}
	rank := q * buckets[les[len(les)-1]]
	lower, below := 0.0, 0.0
	for _, le := range les {
		n := buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, n
	}
	return lower
}

func pct(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func fmtSec(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case math.Abs(x) < 1:
		return fmt.Sprintf("%.0f ms", 1000*x)
	default:
		return fmt.Sprintf("%.2f s", x)
	}
}
