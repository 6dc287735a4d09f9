// Package copyd is the copy daemon: a consumer group over file manifests
// that copies and verifies data files from the source to the DR storage and
// publishes one completion record per file.
//
// Not built yet: see the copyd issue.
package copyd
