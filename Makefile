# Keybound — `make demo` runs the whole story, `make test` runs every test.
# Both install the system libraries they need first (apt-get on Debian, brew on macOS).

SWIFT      ?= swift
PKG_CONFIG_LIBS := libcrypto libsodium sqlite3 libmicrohttpd
APT_PKGS   := pkg-config libssl-dev libsodium-dev libsqlite3-dev libmicrohttpd-dev
BREW_PKGS  := pkg-config openssl@3 libsodium sqlite libmicrohttpd
UNAME      := $(shell uname -s)
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build test lint demo bench docs clean

## deps: install the C libraries that pkg-config cannot find yet
deps:
	@missing=0; \
	command -v pkg-config >/dev/null 2>&1 || missing=1; \
	for lib in $(PKG_CONFIG_LIBS); do pkg-config --exists $$lib 2>/dev/null || missing=1; done; \
	if [ $$missing = 1 ]; then \
	  if [ "$(UNAME)" = Darwin ]; then brew install $(BREW_PKGS); \
	  else echo "make: installing $(APT_PKGS)"; \
	    $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PKGS); fi; \
	fi

## build: compile everything with warnings treated as errors
build: deps
	$(SWIFT) build -Xswiftc -warnings-as-errors

## test: build with zero warnings, check formatting, run every test
test: check-generated build lint
	$(SWIFT) test -Xswiftc -warnings-as-errors

lint:
	$(SWIFT) format lint --strict -r Sources Tests Package.swift Benchmarks

.PHONY: openapi check-generated

## openapi: regenerate Sources/KeyboundServer/OpenAPIDocument.swift from docs/openapi.yaml
openapi:
	bash scripts/embed-openapi.sh

## check-generated: fail when a generated file differs from what its generator writes now
check-generated:
	bash scripts/embed-openapi.sh --check

## demo: the whole story on an emulated Face ID device against a real local server
demo: deps
	$(SWIFT) build --product keybound
	$$($(SWIFT) build --show-bin-path)/keybound demo

## bench: the performance targets of docs/design.md, measured in one release run (about a minute)
bench: deps
	$(SWIFT) run -c release keybound-bench

clean:
	rm -rf .build
