#if os(Linux)
    import Foundation
    import Glibc
    import Keybound

    /// What ``TPMKeyVault`` keeps on disk for one key: the TPM's blob, and what the vault needs to
    /// know without asking the TPM.
    struct KeyRecord: Codable, Sendable {
        static let currentFormat = 1
        /// The file format.
        let format: Int
        let name: ItemName
        /// The policy the key was made for (the TPM enforces the PIN part itself: see ``blob``).
        let policy: AccessPolicy
        let blob: TPMBlob
        /// The name of the PIN object the key's TPM policy requires, nil for a key without a PIN.
        let pinObjectName: Data?
    }

    /// The device PIN's TPM object: its blob and its name (what keys' policies refer to).
    struct PINRecord: Codable, Sendable {
        static let currentFormat = 1
        let format: Int
        let blob: TPMBlob
        let objectName: Data
    }

    /// Which TPM the vault's objects were made by: the public point of its storage primary key,
    /// which derives from the TPM's owner seed (another TPM, or this one after TPM2_Clear, has
    /// another).
    struct TPMIdentity: Codable, Sendable {
        static let currentFormat = 1
        let format: Int
        let storageKey: Data
    }

    /// The vault's directory: one owner-only JSON file per key (`key-NAME.json`), one for the
    /// PIN (`pin.json`) and one naming the TPM (`tpm.json`), each written to a new file and
    /// renamed into place. What a TPM can no longer load is moved aside into `stale-…/`, not
    /// deleted: a vault pointed at the wrong TPM by mistake gets its keys back by moving them home.
    ///
    /// The blobs are no secret (the TPM encrypted their private parts under its storage key, and a
    /// PIN-bound key's TPM policy demands the PIN), but whoever can write here can delete keys or
    /// put back old ones, so the directory is the user's alone (`0700`).
    struct VaultFiles: Sendable {
        let directory: URL

        /// Creates the directory (owner-only) if it does not exist.
        init(directory: URL) throws {
            self.directory = directory
            do {
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw KeyboundError.invalidInput(
                    "cannot create the key directory \(directory.path): \(error)")
            }
        }

        func keyURL(_ name: ItemName) -> URL { directory.appendingPathComponent("key-\(name.rawValue).json") }
        var pinURL: URL { directory.appendingPathComponent("pin.json") }
        var identityURL: URL { directory.appendingPathComponent("tpm.json") }

        /// Moves `urls` (those that exist) into a new `stale-DATE-RANDOM/` folder of the directory.
        /// - Returns: the folder's name, for messages.
        @discardableResult
        func moveAside(_ urls: [URL], now: Date) throws -> String {
            let stamp = ISO8601DateFormatter().string(from: now).replacingOccurrences(of: ":", with: "")
            let name = "stale-\(stamp)-\(UUID().uuidString.prefix(8))"
            let folder = directory.appendingPathComponent(name)
            guard mkdir(folder.path, 0o700) == 0 else { throw failure("create", folder) }
            for url in urls where exists(url) {
                guard rename(url.path, folder.appendingPathComponent(url.lastPathComponent).path) == 0 else {
                    throw failure("move aside", url)
                }
            }
            syncDirectory()
            return name
        }

        /// Everything the TPM made: every key, the PIN object, the TPM's identity.
        func everything() throws -> [URL] { try keyURLs() + [pinURL, identityURL] }

        /// The PIN object and every key bound to it.
        func pinAndItsKeys() throws -> [URL] {
            try keyURLs().filter { ((try? read(KeyRecord.self, at: $0)) ?? nil)?.pinObjectName != nil } + [
                pinURL
            ]
        }

        /// Every key's record.
        func keyURLs() throws -> [URL] {
            try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
                .filter { $0.lastPathComponent.hasPrefix("key-") && $0.pathExtension == "json" }
        }

        func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

        /// The decoded file, or nil when there is none.
        /// - Throws: ``KeyboundError/invalidated`` for a file that does not decode.
        func read<Value: Decodable>(_ type: Value.Type, at url: URL) throws -> Value? {
            guard let data = FileManager.default.contents(atPath: url.path) else {
                return exists(url) ? try unreadable(url) : nil
            }
            do {
                return try JSONDecoder().decode(type, from: data)
            } catch {
                throw KeyboundError(.invalidated, message: "\(url.lastPathComponent) is damaged: \(error)")
            }
        }

        /// Writes `value` as a new owner-only file, synced, renamed over `url`, and syncs the
        /// directory: a crash leaves the old file or the new one, never half of one.
        func write(_ value: some Encodable, to url: URL) throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let data = try encoder.encode(value)
            let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
            let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw failure("create", temporary) }
            var written = 0
            let complete = data.withUnsafeBytes { raw -> Bool in
                guard let base = raw.baseAddress else { return raw.isEmpty }
                while written < raw.count {
                    let count = Glibc.write(descriptor, base + written, raw.count - written)
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { return false }
                    written += count
                }
                return true
            }
            guard complete, fsync(descriptor) == 0 else {
                let error = failure("write", temporary)
                close(descriptor)
                unlink(temporary.path)
                throw error
            }
            close(descriptor)
            guard rename(temporary.path, url.path) == 0 else {
                let error = failure("rename", url)
                unlink(temporary.path)
                throw error
            }
            syncDirectory()
        }

        /// Deletes the file; deleting what is not there succeeds.
        func remove(_ url: URL) throws {
            guard unlink(url.path) == 0 || errno == ENOENT else { throw failure("delete", url) }
            syncDirectory()
        }

        private func syncDirectory() {
            let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard descriptor >= 0 else { return }
            _ = fsync(descriptor)
            close(descriptor)
        }

        private func unreadable<Value>(_ url: URL) throws -> Value {
            throw failure("read", url)
        }

        private func failure(_ what: String, _ url: URL) -> KeyboundError {
            KeyboundError(
                .unexpected, message: "cannot \(what) \(url.path): \(String(cString: strerror(errno)))")
        }
    }
#endif
