// Package emf writes CloudWatch metrics in the embedded metric format: a
// JSON log line with an "_aws" directive and the metric's value at its
// root, which CloudWatch Logs turns into a metric. Publishing costs no API
// call and no permission, and nothing at start-up. The functions' loggers
// write JSON lines (slog's JSON handler), so attributes logged with Attrs
// are at the line's root, where the format wants them.
package emf

import "time"

// Namespace is the service's own metric namespace; template.yaml alarms on
// metrics in it.
const Namespace = "PayReq"

// Directive is the "_aws" value declaring metric name (a Count, no
// dimensions: one series for the whole service) at time at.
func Directive(name string, at time.Time) map[string]any {
	return map[string]any{
		"Timestamp": at.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  Namespace,
			"Dimensions": [][]string{{}},
			"Metrics":    []any{map[string]string{"Name": name, "Unit": "Count"}},
		}},
	}
}

// Attrs are slog key-value pairs that make a JSON log line count value for
// metric name: log.Warn("...", emf.Attrs("X", 1, now)...).
func Attrs(name string, value int, at time.Time) []any {
	return []any{"_aws", Directive(name, at), name, value}
}

// Metric is one metric of a directive.
type Metric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// Directives is the "_aws" value declaring several metrics (no dimensions)
// of one log line at time at.
func Directives(at time.Time, metrics []Metric) map[string]any {
	return map[string]any{
		"Timestamp": at.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  Namespace,
			"Dimensions": [][]string{{}},
			"Metrics":    metrics,
		}},
	}
}
