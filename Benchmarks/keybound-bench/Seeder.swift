import Foundation
import KeyboundServer
import KeyboundWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `count` random bytes.
func randomBytes(_ count: Int, using generator: inout some RandomNumberGenerator) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count {
        var word: UInt64 = generator.next()
        for _ in 0..<min(8, count - bytes.count) {
            bytes.append(UInt8(truncatingIfNeeded: word))
            word >>= 8
        }
    }
    return bytes
}

/// SplitMix64, seeded from the system generator: ids and tokens of a throwaway benchmark
/// database need to be unique and evenly spread like the server's, not secret, and the system
/// generator would make seeding a million rows a million system calls.
struct FastRandom: RandomNumberGenerator {
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// `count` distinct-with-overwhelming-probability random ids of the server's shape (prefix, `_`,
/// 22 characters of the base64url alphabet), in ascending byte order. They are made from sorted
/// random numbers written in base 64 with the alphabet in ASCII order, which keeps the order:
/// sorting a million strings would cost seconds of the time bound.
func sortedIdentifiers(_ prefix: String, count: Int, using generator: inout some RandomNumberGenerator)
    -> [String]
{
    let ordered = Array("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz".utf8)
    var numbers = (0..<count).map { _ in
        (high: generator.next() >> 4 as UInt64, low: generator.next() as UInt64)
    }
    numbers.sort { $0.high != $1.high ? $0.high < $1.high : $0.low < $1.low }
    let head = Array((prefix + "_").utf8)
    return numbers.map { number in
        var bytes = head
        for shift in stride(from: 54, through: 0, by: -6) {
            bytes.append(ordered[Int(number.high >> UInt64(shift) & 63)])
        }
        for shift in stride(from: 58, through: 4, by: -6) {
            bytes.append(ordered[Int(number.low >> UInt64(shift) & 63)])
        }
        bytes.append(ordered[Int(number.low & 15) << 2])
        bytes.append(UInt8(ascii: "A"))
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A random id in the server's format: a prefix, `_`, base64url of 16 random bytes.
func randomIdentifier(_ prefix: String, using generator: inout some RandomNumberGenerator) -> String {
    prefix + "_" + Base64URL.encode(Data(randomBytes(16, using: &generator)))
}

/// Milliseconds since 1970, as the server stores time.
/// The time the seeded rows are written at.
func seedTime() -> Date { Date(milliseconds: Date().milliseconds) }

/// The server's storage as the seeder writes to it: one transaction per batch of inserts.
protocol SeedStorage {
    /// Runs `body` as one transaction of inserts.
    func batch(_ body: (any SQLConnection) throws -> Void) throws
}

extension SQLiteDatabase: SeedStorage {
    func batch(_ body: (any SQLConnection) throws -> Void) throws { try write(body) }
}

extension PostgresDatabase: SeedStorage {
    /// Pipelined: a million rows must not wait for a round trip each.
    func batch(_ body: (any SQLConnection) throws -> Void) throws { try bulkWrite(body) }
}

/// Bulk inserts into the server's database, for populations that the HTTP API cannot create
/// inside the time bound (each API login is a durable transaction).
///
/// Everything goes through the server's own storage: its migrations make the schema, its
/// ``SQLiteDatabase`` or ``PostgresDatabase`` writes (in batches of one transaction each), and
/// its ``Rows`` are the INSERTs, so the rows have exactly the formats the server writes and reads.
enum Seed {
    /// Rows per transaction.
    static let batch = 25_000

    /// Creates the server's schema in a new database file (its migrations).
    static func createSchema(path: String) throws {
        try Migrations.apply(to: open(path))
    }

    /// The server's storage on `path`. Seeding runs at synchronous=normal: a failed seed leaves
    /// a throwaway file.
    private static func open(_ path: String) throws -> SQLiteDatabase {
        try SQLiteDatabase(path: path, readers: 1, synchronous: .normal)
    }

    /// Runs `body` with the storage on `path`, then closes it and writes the seeded pages out:
    /// otherwise the kernel flushes them during the next measurement, and the server's commits
    /// wait behind hundreds of MiB of writeback.
    private static func withDatabase<T>(_ path: String, _ body: (SQLiteDatabase) throws -> T) throws -> T {
        let result = try body(open(path))
        sync()
        return result
    }

    /// ``usersWithDevices(into:count:passwordHash:publicKey:deadline:)`` into the SQLite file at
    /// `path`.
    static func usersWithDevices(
        path: String, count: Int, passwordHash: String, publicKey: Data, deadline: UInt64
    ) throws -> Int {
        try withDatabase(path) { database in
            try usersWithDevices(
                into: database, count: count, passwordHash: passwordHash, publicKey: publicKey,
                deadline: deadline)
        }
    }

    /// Inserts up to `count` users, each with one bound, active device (all filler devices share
    /// one public key: nothing requires keys to differ, and no filler device ever logs in). Ids
    /// are random and shaped like the server's, and inserted in key order, which only makes the
    /// B-tree inserts cheaper. Works in batches and stops at `deadline`; returns how many were
    /// inserted.
    static func usersWithDevices(
        into storage: some SeedStorage, count: Int, passwordHash: String, publicKey: Data, deadline: UInt64
    ) throws -> Int {
        guard count > 0 else { return 0 }
        var generator = FastRandom()
        let userIDs = sortedIdentifiers("usr", count: count, using: &generator)
        let deviceIDs = sortedIdentifiers("dev", count: count, using: &generator)
        let now = seedTime()
        var inserted = 0
        while inserted < count, nanoseconds() < deadline {
            let upper = min(count, inserted + batch)
            try storage.batch { connection in
                for index in inserted..<upper {
                    try Rows.insertUser(
                        connection, id: userIDs[index], username: "filler\(1_000_000_000 + index)",
                        passwordHash: passwordHash, createdAt: now)
                    try Rows.insertDevice(
                        connection, id: deviceIDs[index], userID: userIDs[index], clientID: "filler-phone",
                        name: "phone", keyProtection: .secureEnclave, publicKey: publicKey, createdAt: now)
                }
            }
            inserted = upper
        }
        return inserted
    }

    /// Inserts `count` users, each with one live password session and its access and refresh
    /// token, plus the users named `loginUsers` (no session) with `passwordHash`. Returns a
    /// sample of the access tokens, so the caller can check the server accepts them.
    static func sessions(path: String, count: Int, passwordHash: String, loginUsers: [String]) throws
        -> [String]
    {
        var generator = FastRandom()
        let now = seedTime()
        return try withDatabase(path) { database in
            try database.write { connection in
                for username in loginUsers {
                    try Rows.insertUser(
                        connection, id: randomIdentifier("usr", using: &generator), username: username,
                        passwordHash: passwordHash, createdAt: now)
                }
            }
            // Ids in key order (cheaper B-tree inserts); tokens are random, as the server's are.
            let userIDs = sortedIdentifiers("usr", count: count, using: &generator)
            let sessionIDs = sortedIdentifiers("ses", count: count, using: &generator)
            var sample: [String] = []
            var inserted = 0
            while inserted < count {
                let upper = min(count, inserted + batch)
                try database.write { connection in
                    for index in inserted..<upper {
                        let userID = userIDs[index]
                        let sessionID = sessionIDs[index]
                        try Rows.insertUser(
                            connection, id: userID, username: "holder\(1_000_000_000 + index)",
                            passwordHash: passwordHash, createdAt: now)
                        try Rows.insertSession(
                            connection, id: sessionID, userID: userID, clientID: "phone", deviceID: nil,
                            method: .password, createdAt: now)
                        for (kind, lifetime) in [
                            (TokenKind.access, Int64(15 * 60)), (.refresh, 30 * 24 * 3600),
                        ] {
                            let token = Base64URL.encode(Data(randomBytes(32, using: &generator)))
                            if kind == .access && sample.count < 100 && index % max(1, count / 100) == 0 {
                                sample.append(token)
                            }
                            try Rows.insertToken(
                                connection, token, kind: kind, sessionID: sessionID,
                                expiresAt: now.addingTimeInterval(TimeInterval(lifetime)))
                        }
                    }
                }
                inserted = upper
            }
            return sample
        }
    }
}
