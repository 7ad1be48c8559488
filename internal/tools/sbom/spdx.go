package main

import (
	"debug/buildinfo"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// An SPDX 2.3 document, with only the fields this tool writes
// (https://spdx.github.io/spdx-spec/v2.3/).
type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	Name                  string        `json:"name"`
	SPDXID                string        `json:"SPDXID"`
	VersionInfo           string        `json:"versionInfo,omitempty"`
	PackageFileName       string        `json:"packageFileName,omitempty"`
	Supplier              string        `json:"supplier,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	Checksums             []checksum    `json:"checksums,omitempty"`
	LicenseConcluded      string        `json:"licenseConcluded"`
	LicenseDeclared       string        `json:"licenseDeclared"`
	CopyrightText         string        `json:"copyrightText"`
	Comment               string        `json:"comment,omitempty"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []externalRef `json:"externalRefs,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

// artifact is the binary the document describes.
type artifact struct {
	Name      string // the document's name, e.g. outbox-cdc_v0.1.0_linux_amd64
	File      string // the binary's file name in the archive
	Version   string // the release's version; the main module's if empty
	SHA256    string // of the binary, hex
	Source    string // the project's address, e.g. https://github.com/outbox-cdc/outbox-cdc
	License   string // the project's SPDX license expression
	Supplier  string // e.g. "Organization: The outbox-cdc authors"
	CreatedAt time.Time
}

// newDocument describes a Go binary: the main module as the application,
// each module linked into it and the standard library as its dependencies.
func newDocument(a artifact, bi *buildinfo.BuildInfo) document {
	version := a.Version
	if version == "" {
		version = bi.Main.Version
	}
	main := pkg{
		Name: bi.Main.Path, SPDXID: "SPDXRef-Package-main", VersionInfo: version,
		PackageFileName: a.File, Supplier: a.Supplier, DownloadLocation: a.Source,
		Checksums:        []checksum{{"SHA256", a.SHA256}},
		LicenseConcluded: a.License, LicenseDeclared: a.License, CopyrightText: noAssertion,
		Comment:               buildComment(bi),
		PrimaryPackagePurpose: "APPLICATION",
		ExternalRefs:          []externalRef{purl(bi.Main.Path, version)},
	}
	if main.DownloadLocation == "" {
		main.DownloadLocation = noAssertion
	}
	goVersion := strings.Fields(bi.GoVersion)[0] // "go1.26.8 X:…" with experiments
	stdlib := pkg{
		Name: "stdlib", SPDXID: "SPDXRef-Package-stdlib", VersionInfo: goVersion,
		DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: "BSD-3-Clause",
		CopyrightText: noAssertion, Comment: "the Go standard library and runtime",
		PrimaryPackagePurpose: "LIBRARY", ExternalRefs: []externalRef{purl("stdlib", goVersion)},
	}
	d := document{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: a.Name,
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s-%s", strings.TrimSuffix(a.Source, "/"), a.Name, a.SHA256),
		CreationInfo: creationInfo{
			Created:  a.CreatedAt.UTC().Format(time.RFC3339),
			Creators: creators(a.Supplier),
		},
		Packages:      []pkg{main, stdlib},
		Relationships: []relationship{{"SPDXRef-DOCUMENT", "DESCRIBES", main.SPDXID}, {main.SPDXID, "DEPENDS_ON", stdlib.SPDXID}},
	}
	seen := map[string]bool{}
	for _, m := range bi.Deps {
		p := dependency(m)
		for id, n := p.SPDXID, 2; seen[p.SPDXID]; n++ {
			p.SPDXID = fmt.Sprintf("%s-%d", id, n) // two paths alike once sanitized
		}
		seen[p.SPDXID] = true
		d.Packages = append(d.Packages, p)
		d.Relationships = append(d.Relationships, relationship{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	return d
}

// dependency is a module linked into the binary (its replacement, if one
// replaced it).
func dependency(m *debug.Module) pkg {
	comment := ""
	if m.Replace != nil {
		comment = fmt.Sprintf("replaces %s %s", m.Path, m.Version)
		m = m.Replace
	}
	if m.Sum != "" {
		comment = strings.TrimPrefix(comment+"; go.sum "+m.Sum, "; ")
	}
	return pkg{
		Name: m.Path, SPDXID: spdxID(m.Path, m.Version), VersionInfo: m.Version,
		DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: noAssertion,
		CopyrightText: noAssertion, Comment: comment, PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs: []externalRef{purl(m.Path, m.Version)},
	}
}

// buildComment records how the binary was built: Go version, platform,
// cgo, trimpath (the settings that change what was linked).
func buildComment(bi *buildinfo.BuildInfo) string {
	parts := []string{"built with " + bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "-tags", "vcs.revision", "vcs.modified":
			parts = append(parts, s.Key+"="+s.Value)
		}
	}
	return strings.Join(parts, " ")
}

// purl is a Go module's package URL (pkg:golang/PATH@VERSION).
func purl(path, version string) externalRef {
	loc := "pkg:golang/" + path
	if version != "" && version != "(devel)" {
		loc += "@" + version
	}
	return externalRef{"PACKAGE-MANAGER", "purl", loc}
}

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes an SPDX identifier (letters, digits, '.' and '-') of a
// module's path and version.
func spdxID(path, version string) string {
	return "SPDXRef-Package-go-" + notIDChar.ReplaceAllString(path+"-"+version, "-")
}

func creators(supplier string) []string {
	if supplier == "" {
		return []string{"Tool: outbox-cdc-sbom"}
	}
	return []string{"Tool: outbox-cdc-sbom", supplier}
}
