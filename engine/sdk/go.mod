module github.com/wardenhq/warden/engine/sdk

go 1.24
