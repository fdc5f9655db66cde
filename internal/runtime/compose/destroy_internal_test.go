package compose

import (
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/hoststep"
)

func TestExternalVolumes(t *testing.T) {
	t.Parallel()

	spec := func(files ...string) *Spec {
		s := &Spec{}
		for i, content := range files {
			p := []string{"a.yml", "b.yml", "c.yml"}[i]
			s.Files = append(s.Files, hoststep.ComposeFile{Path: p, Content: content})
			s.ComposeFiles = append(s.ComposeFiles, p)
		}
		return s
	}
	for name, tc := range map[string]struct {
		spec *Spec
		want map[string]bool
	}{
		"OwnVolumesAreNotExternal": {
			spec(`volumes: {data: {}, named: {name: app-data}}`),
			map[string]bool{},
		},
		"ExternalByKeyAndByName": {
			spec("volumes:\n  shared:\n    external: true\n  renamed:\n    external: true\n    name: backups\n"),
			map[string]bool{"shared": true, "backups": true},
		},
		"TheOlderExternalName": {
			spec("volumes:\n  old:\n    external:\n      name: legacy\n"),
			map[string]bool{"legacy": true},
		},
		"ALaterFileMakesAVolumeExternal": {
			spec("volumes:\n  data: {}\n", "volumes:\n  data:\n    external: true\n"),
			map[string]bool{"data": true},
		},
		"AnInterpolatedNameIsNotKnown": {
			spec("volumes:\n  env:\n    external: true\n    name: ${VOLUME}\n"),
			map[string]bool{},
		},
		"NoVolumes": {
			spec("services: {web: {image: x}}\n"),
			map[string]bool{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, externalVolumes(tc.spec))
		})
	}
}
