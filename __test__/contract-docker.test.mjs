// The sandbox contract (sandbox-contract.mjs) on a DockerSandbox of the local test engine
// (unix socket); every container it makes is labelled with this run and none is left.
import { dockerContract } from './docker-contract.mjs'

dockerContract('local')
