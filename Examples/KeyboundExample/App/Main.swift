// The Xcode app target's only source file: everything else is in KeyboundExampleApple.
import KeyboundExampleApple

@main
@MainActor
enum Main {
    static func main() { KeyboundExampleApp.main() }
}
