# Keybound — `make demo` runs the whole story, `make test` runs every test.
# Both install the system libraries they need first (apt-get on Debian, brew on macOS).

SWIFT      ?= swift
UNAME      := $(shell uname -s)
PKG_CONFIG_LIBS := libcrypto libsodium sqlite3 libmicrohttpd libpq
APT_PKGS   := pkg-config libssl-dev libsodium-dev libsqlite3-dev libmicrohttpd-dev libpq-dev libtss2-dev \
              libpam0g-dev libdbus-1-dev
BREW_PKGS  := pkg-config openssl@3 libsodium sqlite libmicrohttpd libpq
# The TPM 2.0 software stack (tss2-esys, with every TCTI), Linux-PAM (pam) and libdbus-1 (dbus-1)
# that KeyboundLinux builds on: Linux only.
# On Apple platforms KeyboundLinux compiles to nothing and needs no C library, so there is no brew
# package to ask for.
ifneq ($(UNAME),Darwin)
PKG_CONFIG_LIBS += tss2-esys pam dbus-1
endif
# The PostgreSQL server the tests and the bench start throwaway clusters of (initdb, pg_ctl).
APT_PG     := postgresql
BREW_PG    := postgresql@15
# The software TPM the KeyboundLinux tests start (swtpm) and the tools they configure its
# dictionary-attack lockout and count its loaded handles with (tpm2-tools). Linux only.
APT_TPM    := swtpm tpm2-tools
# The PAM modules the PAMVerifier tests stack (pam_userdb, pam_faillock: libpam-modules) and the
# Berkeley DB tool that makes pam_userdb's database (db_load: db-util). Linux only.
APT_PAM    := libpam-modules db-util
# A private session bus and a keyring on it for the SecretServiceStore tests. Linux only.
APT_KEYRING := dbus-daemon gnome-keyring
# fprintd (with libfprint's virtual reader) on a private system bus, polkit mocked by
# python3-dbusmock (run by Debian's /usr/bin/python3), for the FprintdVerifier tests. Linux only.
APT_FPRINTD := fprintd python3-dbusmock
DOCC       ?= $(if $(filter Darwin,$(UNAME)),xcrun docc,docc)
DOCS_BUILD := .build/docs-build
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps test-deps api-test-deps build openapi schema test test-sanitizers test-ha lint demo bench docs clean fuzz fuzz-smoke fuzz-api oidc-interop

## deps: install the C libraries that pkg-config cannot find yet, and the PostgreSQL server the
## tests run against (without it those tests are skipped, and say so)
deps:
	@missing=0; \
	command -v pkg-config >/dev/null 2>&1 || missing=1; \
	for lib in $(PKG_CONFIG_LIBS); do pkg-config --exists $$lib 2>/dev/null || missing=1; done; \
	if [ $$missing = 1 ]; then \
	  if [ "$(UNAME)" = Darwin ]; then brew install $(BREW_PKGS); \
	  else echo "make: installing $(APT_PKGS)"; \
	    $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PKGS); fi; \
	fi
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then \
	  echo "make: installing the PostgreSQL server for the tests"; \
	  if [ "$(UNAME)" = Darwin ]; then brew install $(BREW_PG); \
	  else $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PG); fi \
	  || echo "make: PostgreSQL could not be installed; the PostgreSQL tests will be skipped, and say so"; \
	fi

## openapi: embed docs/openapi.yaml (and the sign-in page) in the server again. The EmbedFiles
## plugin does it in every build, into the build folder: no generated file is committed, so this
## can change nothing tracked, and it fails if it did.
openapi: deps
	@before=$$(git status --porcelain 2>/dev/null; git diff 2>/dev/null | cksum); \
	$(SWIFT) build --target KeyboundServer && \
	after=$$(git status --porcelain 2>/dev/null; git diff 2>/dev/null | cksum); \
	if [ "$$before" != "$$after" ]; then echo "make openapi: the build changed the tree" >&2; exit 1; fi

## schema: write docs/schema.sql again from the migrations (SchemaDocumentTests fails while it
## differs from them)
schema: deps
	KEYBOUND_WRITE_SCHEMA=1 $(SWIFT) test --filter SchemaDocumentTests

## build: compile everything with warnings treated as errors
build: deps
	$(SWIFT) build -Xswiftc -warnings-as-errors
	@# The fuzz harnesses exist only with KEYBOUND_FUZZ set: compile them too (without libFuzzer,
	@# which only `make fuzz` links), so that they cannot fall behind the code they fuzz.
	KEYBOUND_FUZZ=1 $(SWIFT) build --target keybound-fuzz -Xswiftc -warnings-as-errors

## test-deps: headless Chromium for the sign-in page's real-browser test, strace for the state-file
## crash tests, swtpm and tpm2-tools for the TPM tests, PAM modules and db_load for the PAM tests,
## dbus-daemon and gnome-keyring for the Secret Service tests, fprintd and python3-dbusmock for the
## fprintd tests (without them those tests are skipped, and say so)
test-deps:
	@if [ "$(UNAME)" != Darwin ] && ! command -v chromium >/dev/null 2>&1; then \
	  echo "make: installing chromium for the real-browser test"; \
	  ( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends chromium ) \
	  || echo "make: chromium could not be installed; the real-browser passkey test will be skipped"; \
	fi
	@# strace and prlimit cut the emulator's state save at chosen bytes (StateFileCrashTests).
	@if [ "$(UNAME)" != Darwin ] && ! command -v strace >/dev/null 2>&1; then \
	  echo "make: installing strace for the state-file crash tests"; \
	  ( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends strace util-linux ) \
	  || echo "make: strace could not be installed; the state-file crash tests will be skipped"; \
	fi
	@# A throwaway software TPM per test (KeyboundLinuxTests): swtpm, and tpm2-tools to set it up.
	@if [ "$(UNAME)" != Darwin ] && { ! command -v swtpm >/dev/null 2>&1 || ! command -v tpm2_getcap >/dev/null 2>&1; }; then \
	  echo "make: installing $(APT_TPM) for the TPM tests"; \
	  ( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_TPM) ) \
	  || echo "make: swtpm could not be installed; the TPM tests will be skipped"; \
	fi
	@# A PAM stack of each test's own (PAMVerifierTests): pam_userdb over a db_load database, pam_faillock.
	@if [ "$(UNAME)" != Darwin ] && { ! command -v db_load >/dev/null 2>&1 || \
	  ! ls /usr/lib/*/security/pam_userdb.so /lib/*/security/pam_userdb.so >/dev/null 2>&1; }; then \
	  echo "make: installing $(APT_PAM) for the PAM tests"; \
	  ( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PAM) ) \
	  || echo "make: the PAM modules could not be installed; the PAM tests will be skipped"; \
	fi
	@# A session bus and gnome-keyring of each test's own (SecretServiceStoreTests).
	@if [ "$(UNAME)" != Darwin ] && { ! command -v dbus-daemon >/dev/null 2>&1 || \
	  ! command -v gnome-keyring-daemon >/dev/null 2>&1; }; then \
	  echo "make: installing $(APT_KEYRING) for the Secret Service tests"; \
	  ( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_KEYRING) ) \
	  || echo "make: gnome-keyring could not be installed; the Secret Service tests will be skipped"; \
	fi
	@# fprintd, its virtual reader and a mocked polkit of each test's own (FprintdVerifierTests).
	@if [ "$(UNAME)" != Darwin ] && { [ ! -x /usr/libexec/fprintd ] || \
	  ! /usr/bin/python3 -c 'import dbusmock' >/dev/null 2>&1; }; then \
	  echo "make: installing $(APT_FPRINTD) for the fprintd tests"; \
	  ( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_FPRINTD) ) \
	  || echo "make: fprintd could not be installed; the fprintd tests will be skipped"; \
	fi

## api-test-deps: python3 with venv, for schemathesis and the OIDC client libraries (scripts/fuzz-api.sh
## and scripts/oidc-interop.sh install them into .build/) and standardwebhooks (the webhook tests install
## it into .build/webhooks); Debian's python3 makes venvs only with python3-venv
api-test-deps:
	@d=$$(mktemp -d); if ! python3 -m venv "$$d/venv" >/dev/null 2>&1; then \
	  if [ "$(UNAME)" = Darwin ]; then brew install python3; \
	  else echo "make: installing python3-venv for schemathesis"; \
	    $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends python3 python3-venv; fi; \
	fi; rm -rf "$$d"

## test: build with zero warnings, check formatting and the documentation, run every test, then
## a bounded schemathesis run against the live server (API_TEST_SECONDS of generation), then the
## OpenID Connect flows of independent client libraries against it, on SQLite and PostgreSQL
API_TEST_SECONDS ?= 60
test: build lint docs test-deps api-test-deps
	$(SWIFT) test -Xswiftc -warnings-as-errors
	API_FUZZ_SECONDS=$(API_TEST_SECONDS) SWIFT="$(SWIFT)" bash scripts/fuzz-api.sh
	SWIFT="$(SWIFT)" bash scripts/oidc-interop.sh

## test-sanitizers: the whole suite under AddressSanitizer (with LeakSanitizer), then under
## ThreadSanitizer, each from a build of its own (.build/asan, .build/tsan). Not part of `make test`
## (about 30 minutes here; see docs/sanitizers.md).
test-sanitizers: deps test-deps
	SWIFT="$(SWIFT)" bash scripts/test-sanitizers.sh

## test-ha: PostgreSQL high availability: etcd + two PostgreSQL nodes under Patroni (synchronous
## replication) + two `keybound serve` on the multi-host URL under a retrying mixed load; a failover
## by SIGKILL, the old primary rejoining, a switchover, the synchronous standby lost. Prints the
## RTO and the acknowledged writes lost (must be 0). Installs etcd-server and Patroni itself
## (scripts/test-ha.sh); about 2 minutes here; docs/server.md, "High availability".
test-ha: deps
	SWIFT="$(SWIFT)" bash scripts/test-ha.sh

## lint: swift-format's strict lint, and the server's files stay readable: none over 400 lines.
lint:
	$(SWIFT) format lint --strict -r Sources Tests Package.swift Plugins Benchmarks Fuzz
	@long=$$(find Sources/KeyboundServer -name '*.swift' -exec wc -l {} + | awk '$$2 != "total" && $$1 > 400'); \
	if [ -n "$$long" ]; then echo "lint: files over 400 lines in Sources/KeyboundServer:"; echo "$$long"; exit 1; fi

## demo: the whole story on an emulated Face ID device against a real local server
demo: deps
	$(SWIFT) build --product keybound
	$$($(SWIFT) build --show-bin-path)/keybound demo

## docs: the DocC documentation of the Keybound module, built from symbol graphs into .build/docs
## (serve it with `python3 -m http.server -d .build/docs`, open /documentation/keybound), and of
## KeyboundVerifier into .build/docs-verifier. Any DocC warning fails the build. The symbol graphs
## come from a build of their own (DOCS_BUILD), so the extra compiler flags do not invalidate the
## normal build's objects.
docs:
	$(SWIFT) build --scratch-path $(DOCS_BUILD) --target Keybound \
	  -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc $(CURDIR)/$(DOCS_BUILD)/symbol-graphs
	@# Keybound's own graph already holds the KeyboundWire symbols it re-exports; KeyboundWire's
	@# graph would make DocC see a second module.
	rm -rf $(DOCS_BUILD)/keybound-symbol-graphs && mkdir -p $(DOCS_BUILD)/keybound-symbol-graphs
	cp $(DOCS_BUILD)/symbol-graphs/Keybound.symbols.json $(DOCS_BUILD)/keybound-symbol-graphs/
	$(DOCC) convert Sources/Keybound/Keybound.docc \
	  --additional-symbol-graph-dir $(DOCS_BUILD)/keybound-symbol-graphs --output-path .build/docs \
	  --fallback-display-name Keybound --fallback-bundle-identifier dev.keybound.Keybound \
	  --warnings-as-errors
	$(SWIFT) build --scratch-path $(DOCS_BUILD) --target KeyboundVerifier \
	  -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc $(CURDIR)/$(DOCS_BUILD)/symbol-graphs
	rm -rf $(DOCS_BUILD)/verifier-symbol-graphs && mkdir -p $(DOCS_BUILD)/verifier-symbol-graphs
	cp $(DOCS_BUILD)/symbol-graphs/KeyboundVerifier.symbols.json $(DOCS_BUILD)/verifier-symbol-graphs/
	$(DOCC) convert Sources/KeyboundVerifier/KeyboundVerifier.docc \
	  --additional-symbol-graph-dir $(DOCS_BUILD)/verifier-symbol-graphs --output-path .build/docs-verifier \
	  --fallback-display-name KeyboundVerifier --fallback-bundle-identifier dev.keybound.KeyboundVerifier \
	  --warnings-as-errors

## bench: the performance targets of docs/design.md, measured in one release run (about 80 s)
bench: deps
	$(SWIFT) run -c release keybound-bench

## fuzz: every libFuzzer harness (Fuzz/Harnesses) for FUZZ_SECONDS each (default 600), from the
## committed seeds in Fuzz/Corpus; HARNESSES="cbor json" runs only those. Linux only (libFuzzer
## comes with the Swift toolchain there). Not part of `make test`; see docs/fuzzing.md.
FUZZ_SECONDS ?= 600
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) SWIFT="$(SWIFT)" bash scripts/fuzz.sh $(HARNESSES)

## fuzz-smoke: every harness for 20 s, to check that they build, start and find nothing quickly
fuzz-smoke: deps
	FUZZ_SECONDS=20 SWIFT="$(SWIFT)" bash scripts/fuzz.sh $(HARNESSES)

## fuzz-api: the schemathesis run of `make test` for API_FUZZ_SECONDS (default 1800): every
## operation, every check, authenticated and stateful; see docs/testing.md
API_FUZZ_SECONDS ?= 1800
fuzz-api: deps api-test-deps
	API_FUZZ_SECONDS=$(API_FUZZ_SECONDS) SWIFT="$(SWIFT)" bash scripts/fuzz-api.sh

## oidc-interop: only the OpenID Connect flows of `make test` (both engines); see docs/testing.md
oidc-interop: deps api-test-deps
	SWIFT="$(SWIFT)" bash scripts/oidc-interop.sh

clean:
	rm -rf .build
