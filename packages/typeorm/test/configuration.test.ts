import { describeConfiguration } from './configuration'

describeConfiguration('')
