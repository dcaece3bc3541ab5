// modes: present absent
// Mistakes the checker must report without Mastra too (each line marked with the error
// expected there).
import { LocalSandbox, Workspace } from 'native-workspace'

export const workspace = new Workspace({
  sandbox: ({ requestContext }) => new LocalSandbox({ workingDirectory: requestContext.get('threadId').toUpperCase() }), // error TS2571
})
export const chroot = new LocalSandbox({ isolation: 'chroot' }) // error TS2322
