module github.com/sluice-go/sluice

go 1.25

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
