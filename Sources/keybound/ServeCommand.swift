/// `keybound serve`: runs the HTTP API server.
enum ServeCommand {
    static func run(_ arguments: [String]) async -> Int32 {
        printError("keybound serve: not built yet")
        return 1
    }
}
