import Testing

@testable import KeyboundServer

/// A row's typed reads: NULL is nil only where the read is optional, and any other type or a
/// column past the row's end is an error, never a nil.
@Suite("SQL rows")
struct SQLRowTests {
    private let row = SQLRow(values: [.text("a"), .integer(7), .null])

    @Test func optionalReadsGiveNilOnlyForNull() throws {
        #expect(try row.optionalText(0) == "a")
        #expect(try row.optionalText(2) == nil)
        #expect(try row.optionalInteger(1) == 7)
        #expect(try row.optionalInteger(2) == nil)
    }

    @Test func otherTypesAndMissingColumnsAreErrors() {
        #expect(throws: DatabaseError.self) { try row.text(2) }
        #expect(throws: DatabaseError.self) { try row.integer(2) }
        #expect(throws: DatabaseError.self) { try row.optionalText(1) }
        #expect(throws: DatabaseError.self) { try row.optionalInteger(0) }
        #expect(throws: DatabaseError.self) { try row.optionalText(3) }
        #expect(throws: DatabaseError.self) { try row.optionalInteger(3) }
    }
}
