package compose

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"sluice/internal/errs"
)

// Model is what the runtime reads of a project's Compose files: enough to
// refuse what it cannot pin or run as written, to write the override that
// pins and labels every Compose service, and to hold the running
// containers to the files. It is no Compose implementation: Compose itself
// validates the project (Validate runs its config).
type Model struct {
	// Version is the first file's top-level version; "" when it has none.
	// Compose v1 refuses files of different versions, so the override
	// states the same one.
	Version string
	// Services are the Compose services of every file, merged by name,
	// sorted by name.
	Services []Service
	// Networks are the top-level networks, by key.
	Networks map[string]Network
}

// Service is one Compose service as the files declare it.
type Service struct {
	Name string
	// Image is the image as the last file that names one writes it; ""
	// when none does.
	Image string
	// Build is true when a file builds its image (build:): no pin can
	// verify what it builds.
	Build bool
	// Ports are the published ports of every file; PortsUnknown is true
	// when one is interpolated or a range, which drift checks then skip.
	Ports        []Port
	PortsUnknown bool
	// Networks are the keys of the networks it joins; nil joins the
	// project's default network. NetworkMode, when set, replaces them.
	Networks    []string
	NetworkMode string
}

// Port is one published port: "ip:published->target/protocol" (String).
type Port struct {
	// HostIP is "" for every address; Published is "" for a port the
	// engine chooses.
	HostIP, Published, Target, Protocol string
}

// String is the port as drift findings name it.
func (p Port) String() string {
	ip := p.HostIP
	if ip == "" {
		ip = "0.0.0.0"
	}
	return fmt.Sprintf("%s:%s->%s/%s", ip, p.Published, p.Target, p.Protocol)
}

// Network is a top-level network.
type Network struct {
	// Name is the name the engine knows it by, "" when interpolated.
	Name     string
	External bool
}

// Service returns the Compose service called name; nil when no file
// declares it.
func (m *Model) Service(name string) *Service {
	for i := range m.Services {
		if m.Services[i].Name == name {
			return &m.Services[i]
		}
	}
	return nil
}

// ServiceNames are the Compose services' names, sorted.
func (m *Model) ServiceNames() []string {
	out := make([]string, len(m.Services))
	for i, s := range m.Services {
		out[i] = s.Name
	}
	return out
}

// NetworkName is the engine's name of network key in project.
func (m *Model) NetworkName(project, key string) string {
	if n, ok := m.Networks[key]; ok && (n.Name != "" || n.External) {
		return cmpOr(n.Name, key)
	}
	return project + "_" + key
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// LoadModel reads the Compose files named by composeFiles (in the order
// Compose merges them) from files (path → content). Each refusal is an
// errs.Invalid sentence:
//   - a file that is not YAML, or whose services are not a mapping;
//   - any top-level include: a project is the files the unit lists, and
//     an include, local or remote, would run files the identity does not
//     name (Compose v1 knows no include either);
//   - a service's profiles: a service runs or it is not declared;
//   - an image built from interpolation ($): what runs must be the file's
//     own words and the pin;
//   - an extends that names another file.
//
// Check runs it, with the checks of paths and pins, for the sync and the
// node alike.
func LoadModel(files map[string]string, composeFiles []string) (*Model, error) {
	m := &Model{Networks: map[string]Network{}}
	byName := map[string]*Service{}
	for i, path := range composeFiles {
		text, ok := files[path]
		if !ok {
			return nil, errs.Errorf(errs.Invalid, "Compose file %s is not among the project's files; list it with its content.", path)
		}
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			return nil, errs.Errorf(errs.Invalid, "Compose file %s is not valid YAML: %s.", path, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if i == 0 {
			if v, ok := doc["version"]; ok && v != nil {
				m.Version = scalar(v)
			}
		}
		if _, ok := doc["include"]; ok {
			return nil, errs.Errorf(errs.Invalid, "Compose file %s includes other files (include:), which the compose runtime refuses, local or remote: list every Compose file of the project in the service's spec instead.", path)
		}
		if nets, ok := doc["networks"]; ok && nets != nil {
			nm, ok := asMap(nets)
			if !ok {
				return nil, errs.Errorf(errs.Invalid, "The networks of Compose file %s are not a mapping of network names.", path)
			}
			for key, v := range nm {
				n := m.Networks[key]
				if def, ok := asMap(v); ok {
					if name, ok := def["name"]; ok {
						n.Name = scalar(name)
					}
					switch ext := def["external"].(type) {
					case bool:
						n.External = ext
					case map[string]any:
						n.External = true
						if name, ok := ext["name"]; ok {
							n.Name = scalar(name)
						}
					}
				}
				if strings.Contains(n.Name, "$") {
					n.Name = ""
				}
				m.Networks[key] = n
			}
		}
		raw, ok := doc["services"]
		if !ok || raw == nil {
			continue
		}
		services, ok := asMap(raw)
		if !ok {
			return nil, errs.Errorf(errs.Invalid, "The services of Compose file %s are not a mapping of service names.", path)
		}
		for _, name := range slices.Sorted(maps.Keys(services)) {
			def, ok := asMap(services[name])
			if !ok && services[name] != nil {
				return nil, errs.Errorf(errs.Invalid, "Compose service %s in %s is not a mapping.", name, path)
			}
			s := byName[name]
			if s == nil {
				s = &Service{Name: name}
				byName[name] = s
			}
			if err := s.read(path, def); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		m.Services = append(m.Services, *byName[name])
	}
	return m, nil
}

// read merges one file's definition of s into it.
func (s *Service) read(path string, def map[string]any) error {
	if _, ok := def["profiles"]; ok {
		return errs.Errorf(errs.Invalid, "Compose service %s in %s has profiles, which the compose runtime refuses: a service it runs is always started; drop profiles, or the service.", s.Name, path)
	}
	if ext, ok := def["extends"]; ok {
		if em, ok := asMap(ext); ok {
			if f, ok := em["file"]; ok && f != nil {
				return errs.Errorf(errs.Invalid, "Compose service %s in %s extends a service of file %s, which the compose runtime refuses: copy what it needs into the project's own files.", s.Name, path, scalar(f))
			}
		}
	}
	if img, ok := def["image"]; ok {
		s.Image = scalar(img)
		if strings.Contains(s.Image, "$") {
			return errs.Errorf(errs.Invalid, "The image of Compose service %s in %s is built from interpolation (%s), which the compose runtime refuses: write the image as it is and pin it by digest.", s.Name, path, s.Image)
		}
	}
	if b, ok := def["build"]; ok && b != nil {
		s.Build = true
	}
	if vols, ok := def["volumes"].([]any); ok {
		for _, v := range vols {
			if src := relativeBind(v); src != "" {
				return errs.Errorf(errs.Invalid, "Compose service %s in %s bind-mounts %s, a path relative to the project, which the compose runtime refuses: each version of the project runs from a directory of its own, so what is written there would not carry over to the next one, and the repository's other files are not in it. Use a named volume, or an absolute path on the host.", s.Name, path, src)
			}
		}
	}
	if nm, ok := def["network_mode"]; ok {
		s.NetworkMode = scalar(nm)
	}
	switch nets := def["networks"].(type) {
	case []any:
		for _, n := range nets {
			s.Networks = appendNew(s.Networks, scalar(n))
		}
	case map[string]any:
		for _, n := range slices.Sorted(maps.Keys(nets)) {
			s.Networks = appendNew(s.Networks, n)
		}
	}
	if ports, ok := def["ports"].([]any); ok {
		for _, p := range ports {
			got, ok := parsePort(p)
			if !ok {
				s.PortsUnknown = true
				continue
			}
			for _, g := range got {
				if !slices.Contains(s.Ports, g) {
					s.Ports = append(s.Ports, g)
				}
			}
		}
	}
	return nil
}

// relativeBind is the source of volume entry v (short "src:dst[:mode]" or
// long syntax) when it is a bind mount of a path relative to the project
// directory; "" otherwise.
func relativeBind(v any) string {
	var src string
	switch e := v.(type) {
	case string:
		src, _, _ = strings.Cut(e, ":")
	case map[string]any:
		if t := scalar(e["type"]); t != "" && t != "bind" {
			return ""
		}
		src = scalar(e["source"])
	}
	if src == "." || src == ".." || strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") {
		return src
	}
	return ""
}

func appendNew(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// parsePort reads one entry of a service's ports, short ("127.0.0.1:8080:80/udp",
// "8080:80", "80") or long (target, published, host_ip, protocol); false
// when it is interpolated, a range, or unreadable. An entry that publishes
// nothing on the host (only a target) is no port.
func parsePort(v any) ([]Port, bool) {
	if def, ok := asMap(v); ok {
		p := Port{Target: scalar(def["target"]), Protocol: "tcp"}
		if pub, ok := def["published"]; ok && pub != nil {
			p.Published = scalar(pub)
		}
		if ip, ok := def["host_ip"]; ok && ip != nil {
			p.HostIP = scalar(ip)
		}
		if pr, ok := def["protocol"]; ok && pr != nil {
			p.Protocol = scalar(pr)
		}
		if !plainPort(p.Target) || p.Published != "" && !plainPort(p.Published) || strings.Contains(p.HostIP, "$") {
			return nil, false
		}
		return []Port{p}, true
	}
	text := scalar(v)
	if text == "" || strings.ContainsAny(text, "$-") {
		return nil, false
	}
	p := Port{Protocol: "tcp"}
	if rest, proto, ok := strings.Cut(text, "/"); ok {
		text, p.Protocol = rest, proto
	}
	// The container port is last; before it the host port, and before
	// that the address (which may hold colons itself, as [::1]).
	i := strings.LastIndexByte(text, ':')
	p.Target = text[i+1:]
	if i >= 0 {
		head := text[:i]
		j := strings.LastIndexByte(head, ':')
		p.Published = head[j+1:]
		if j >= 0 {
			p.HostIP = strings.Trim(head[:j], "[]")
		}
	}
	if !plainPort(p.Target) || p.Published != "" && !plainPort(p.Published) {
		return nil, false
	}
	return []Port{p}, true
}

func plainPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536 && strconv.Itoa(n) == s
}

// scalar is a YAML scalar as text: a port given as a number reads as its
// digits.
func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// asMap is a YAML mapping whatever its keys decoded as.
func asMap(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[scalar(k)] = v
		}
		return out, true
	}
	return nil, false
}

// The labels the override gives every Compose service: the sluice service
// it belongs to, the project's identity, and its Compose service's name.
// Compose adds its own (com.docker.compose.project, .service, .oneoff).
const (
	LabelService        = "io.sluice.service"
	LabelDigest         = "io.sluice.digest"
	LabelComposeService = "io.sluice.compose-service"

	labelProject        = "com.docker.compose.project"
	labelComposeService = "com.docker.compose.service"
	labelOneoff         = "com.docker.compose.oneoff"
)

// overrideHeader starts the override file.
const overrideHeader = "# Generated by sluice: every Compose service's image pin and labels. Edits are overwritten.\n"

// Override is the Compose file merged after the project's own: it pins
// every pinned Compose service's image (pins: service → image by digest)
// and gives every Compose service sluice's labels. Its text is
// deterministic (YAML with sorted keys).
func (m *Model) Override(service, identity string, pins map[string]string) string {
	type svc struct {
		Image  string            `yaml:"image,omitempty"`
		Labels map[string]string `yaml:"labels"`
	}
	doc := struct {
		Version  string         `yaml:"version,omitempty"`
		Services map[string]svc `yaml:"services"`
	}{Version: m.Version, Services: map[string]svc{}}
	for _, s := range m.Services {
		doc.Services[s.Name] = svc{Image: pins[s.Name], Labels: map[string]string{
			LabelService: service, LabelDigest: identity, LabelComposeService: s.Name,
		}}
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		panic(err) // strings and maps of them always encode
	}
	return overrideHeader + string(b)
}
