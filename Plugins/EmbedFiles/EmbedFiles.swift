import Foundation
import PackagePlugin

/// Compiles text files into KeyboundServer, so that its one binary carries them (no resource
/// bundle): docs/openapi.yaml as `OpenAPIDocument.text`, the sign-in page's sources
/// (`Resources/sign-in`, with the script both pages share, `Resources/shared/webauthn.js`) as
/// ``SignInPageFiles``' members and the operator console's (`Resources/console`) as
/// ``ConsolePageFiles``'. At build time `keybound-embed` writes
/// each set into a Swift file in the plugin's work directory, never into the source tree; the files
/// it reads are the commands' inputs, so editing one regenerates its Swift and rebuilds the module.
@main
struct EmbedFiles: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let tool = try context.tool(named: "keybound-embed").url
        // From the package's root: Target.directoryURL needs tools version 6.1.
        let package = context.package.directoryURL
        let signIn = package.appending(path: "Sources/KeyboundServer/Resources/sign-in")
        let console = package.appending(path: "Sources/KeyboundServer/Resources/console")
        let shared = package.appending(path: "Sources/KeyboundServer/Resources/shared")
        let embeddings: [(output: String, type: String, members: [(String, URL)])] = [
            (
                "EmbeddedOpenAPIDocument.swift", "OpenAPIDocument",
                [("text", package.appending(path: "docs/openapi.yaml"))]
            ),
            (
                "EmbeddedSignInPageFiles.swift", "SignInPageFiles",
                [
                    ("html", signIn.appending(path: "index.html")),
                    ("script", signIn.appending(path: "sign-in.js")),
                    ("style", signIn.appending(path: "sign-in.css")),
                    ("webauthn", shared.appending(path: "webauthn.js")),
                ]
            ),
            (
                "EmbeddedConsolePageFiles.swift", "ConsolePageFiles",
                [
                    ("html", console.appending(path: "index.html")),
                    ("script", console.appending(path: "console.js")),
                    ("style", console.appending(path: "console.css")),
                ]
            ),
        ]
        return embeddings.map { embedding in
            let output = context.pluginWorkDirectoryURL.appending(path: embedding.output)
            return .buildCommand(
                displayName: "Embedding \(embedding.type) in \(target.name)",
                executable: tool,
                arguments: [output.path(), embedding.type]
                    + embedding.members.map { "\($0.0)=\($0.1.path())" },
                inputFiles: embedding.members.map(\.1),
                outputFiles: [output])
        }
    }
}
